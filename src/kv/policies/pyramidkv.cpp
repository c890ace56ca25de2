// `pyramidkv`: SnapKV scores with layer budgets falling linearly with depth:
// layer 0 gets 2B - B/beta, the last layer B/beta; the total stays L * B.
#include "kv/policies/policies.h"

namespace kvtrim::kv {
namespace {

class PyramidkvPolicy : public SnapkvPolicy {
 public:
  PyramidkvPolicy(int window, int kernel, double beta, int value_norm)
      : SnapkvPolicy(window, kernel, value_norm), beta_(beta) {}
  // SnapKV's scorer under the pyramid allocator (budget::LayerBudget).
  budget::Spec budget() const override {
    budget::Spec s;
    s.kind = budget::Kind::kPyramid;
    s.pyramid_beta = beta_;
    return s;
  }

 private:
  double beta_;
};

}  // namespace

PolicyInfo PyramidkvPolicyInfo() {
  return {"pyramidkv", "SnapKV scores with budgets falling linearly over layers (total unchanged).",
          {{"obs-window", 32, "observation window w (last prompt positions)", 1, 1e6},
           Odd({"pool-kernel", 5, "average-pooling kernel (odd)", 1, 101}),
           Real({"pyramid-beta", 20, "last layer gets B/beta, first 2B - B/beta", 1, 1e6}),
           {"value-norm", 0, "scale attention scores by ||v_j||: none, l2, l1", 0, 2, ValueNormNames()}},
          [](const Params& p) {
            return std::make_unique<PyramidkvPolicy>(static_cast<int>(p.at("obs-window")),
                                                     static_cast<int>(p.at("pool-kernel")), p.at("pyramid-beta"),
                                                     static_cast<int>(p.at("value-norm")));
          }};
}

}  // namespace kvtrim::kv
