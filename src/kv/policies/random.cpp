// `random`: the sinks plus a seeded uniform sample of the other entries.
#include "io/splitmix.h"
#include "kv/policies/policies.h"

namespace kvtrim::kv {
namespace {

class RandomPolicy : public Policy {
 public:
  RandomPolicy(int sinks, uint64_t seed) : sinks_(sinks), seed_(seed) {}
  Plan Compress(const PolicyContext& ctx) override {
    const HeadStore& s = *ctx.store;
    // Each entry's score hashes (seed, layer, head, its position, the step),
    // so the draw is reproducible and independent of thread order.
    uint64_t base = io::Mix64(seed_ ^ io::Mix64(ctx.layer * 1315423911ull + ctx.head) ^ io::Mix64(ctx.logical_len));
    std::vector<double> score(s.size());
    for (int i = 0; i < s.size(); ++i) score[i] = static_cast<double>(io::Mix64(base ^ static_cast<uint64_t>(s.pos(i))) >> 11);
    return Plan::Keep(KeepTop(score, ProtectSinksAndRecent(s, sinks_, 0), ctx.budget));
  }

 private:
  int sinks_;
  uint64_t seed_;
};

}  // namespace

PolicyInfo RandomPolicyInfo() {
  return {"random", "Sinks plus a seeded uniform sample of the rest.",
          {{"sinks", 4, "sink tokens kept at the start"}, {"kv-seed", 0, "sampling seed of the kept sample"}},
          [](const Params& p) {
            return std::make_unique<RandomPolicy>(static_cast<int>(p.at("sinks")), static_cast<uint64_t>(p.at("kv-seed")));
          },
          [](const Params& p) { return PolicyTraits{.protected_entries = static_cast<int>(p.at("sinks"))}; }};
}

}  // namespace kvtrim::kv
