#include "model/rope.h"

#include <cmath>

namespace kvtrim::model {

Rope::Rope(const ModelConfig& c, const std::vector<float>& freq_factors)
    : dims_(c.rope_dims), mode_(c.rope_mode), freq_scale_(c.rope_freq_scale), inv_freq_(c.rope_dims / 2) {
  for (int i = 0; i < dims_ / 2; ++i) {
    inv_freq_[i] = std::pow(static_cast<double>(c.rope_base), -2.0 * i / dims_);
    if (!freq_factors.empty()) inv_freq_[i] /= freq_factors[i];
  }
}

void Rope::Apply(float* x, int n_heads, int head_dim, int pos) const {
  const int half = dims_ / 2;
  const bool normal = mode_ == kernels::RopeMode::kNormal;
  for (int i = 0; i < half; ++i) {
    const double theta = Theta(i, pos);
    const float c = static_cast<float>(std::cos(theta)), s = static_cast<float>(std::sin(theta));
    const int i0 = normal ? 2 * i : i, i1 = normal ? 2 * i + 1 : i + half;
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + h * head_dim;
      const float a = v[i0], b = v[i1];
      v[i0] = a * c - b * s;
      v[i1] = a * s + b * c;
    }
  }
}

}  // namespace kvtrim::model
