// `full`: no compression.
#include "kv/policies/policies.h"

namespace kvtrim::kv {
namespace {

class FullPolicy : public Policy {
 public:
  bool prefill_time() const override { return false; }
  bool decode_time() const override { return false; }
  Plan Compress(const PolicyContext&) override { return {}; }
};

}  // namespace

PolicyInfo FullPolicyInfo() {
  return {"full", "No compression: every entry is kept (the reference).", {},
          [](const Params&) { return std::make_unique<FullPolicy>(); }};
}

}  // namespace kvtrim::kv
