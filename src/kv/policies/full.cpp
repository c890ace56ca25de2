// `full`: no compression.
#include "kv/policies/policies.h"

namespace kvtrim::kv {
namespace {

class FullPolicy : public Policy {
 public:
  Plan Compress(const PolicyContext&) override { return {}; }
};

}  // namespace

PolicyInfo FullPolicyInfo() {
  return {"full", "No compression: every entry is kept (the reference).", {},
          [](const Params&) { return std::make_unique<FullPolicy>(); },
          Fixed({.prefill_time = false, .decode_time = false})};
}

}  // namespace kvtrim::kv
