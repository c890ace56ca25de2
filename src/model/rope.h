// Rotary position embedding as llama.cpp applies it (ggml_rope_ext without
// YaRN): dimension pair i of the first `dims` of each head turns by
//   theta_i(pos) = freq_scale * pos * base^(-2i/dims) / factor_i
// (factor_i from rope_freqs.weight, 1 without it; freq_scale = 1/linear
// factor). Pairs are adjacent (llama) or split halves (neox, qwen2); the
// dimensions past `dims` pass through unchanged.
#pragma once
#include <vector>

#include "kernels/ops.h"
#include "model/config.h"

namespace kvtrim::model {

class Rope {
 public:
  Rope() = default;
  // freq_factors: empty, or dims/2 positive factors.
  Rope(const ModelConfig& c, const std::vector<float>& freq_factors);

  // Rotates n_heads heads of head_dim floats each (x is [n_heads, head_dim]).
  void Apply(float* x, int n_heads, int head_dim, int pos) const;
  // The angle of pair i at position pos.
  double Theta(int i, int pos) const { return freq_scale_ * (pos * inv_freq_[i]); }

 private:
  int dims_ = 0;
  kernels::RopeMode mode_ = kernels::RopeMode::kNormal;
  double freq_scale_ = 1;
  std::vector<double> inv_freq_;  // base^(-2i/dims) / factor_i
};

}  // namespace kvtrim::model
