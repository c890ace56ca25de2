// `pyramidkv`: SnapKV scores with layer budgets falling linearly with depth:
// layer 0 gets 2B - B/beta, the last layer B/beta; the total stays L * B.
#include "kv/policies/policies.h"

namespace kvtrim::kv {

PolicyInfo PyramidkvPolicyInfo() {
  return {"pyramidkv", "SnapKV scores with budgets falling linearly over layers (total unchanged).",
          {{"obs-window", 32, "observation window w (last prompt positions)", 1, 1e6},
           Odd({"pool-kernel", 5, "average-pooling kernel (odd)", 1, 101}),
           Real({"pyramid-beta", 20, "last layer gets B/beta, first 2B - B/beta", 1, 1e6}),
           {"value-norm", 0, "scale attention scores by ||v_j||: none, l2, l1", 0, 2, ValueNormNames()}},
          [](const Params& p) {
            return std::make_unique<SnapkvPolicy>(static_cast<int>(p.at("obs-window")),
                                                  static_cast<int>(p.at("pool-kernel")), static_cast<int>(p.at("value-norm")));
          },
          [](const Params& p) {  // SnapKV's scorer under the pyramid allocator (budget::LayerBudget)
            PolicyTraits t = SnapkvPolicy::Traits(static_cast<int>(p.at("obs-window")));
            t.budget.kind = budget::Kind::kPyramid;
            t.budget.pyramid_beta = p.at("pyramid-beta");
            return t;
          }};
}

}  // namespace kvtrim::kv
