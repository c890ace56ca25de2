// Rotary position embedding as llama.cpp applies it (ggml_rope_ext): pair i
// of the first `dims` dimensions of each head turns by
//   theta_extrap = pos * base^(-2i/dims) / factor_i   (factor_i from
//                  rope_freqs.weight, 1 without it)
//   theta_interp = freq_scale * theta_extrap            (freq_scale = 1/factor)
//   theta        = theta_interp                         (none, linear)
//                  theta_interp * (1 - r_i) + theta_extrap * r_i   (yarn)
// and cos/sin are multiplied by mscale = attn_factor (times
// 1 + 0.1 ln(1/freq_scale) for yarn). YaRN's ramp r_i = 1 - clamp((i - lo) /
// max(0.001, hi - lo), 0, 1) over the correction dims [lo, hi] of ggml's
// ggml_rope_yarn_corr_dims (beta_fast 32, beta_slow 1, the original context).
// Pairs are adjacent (llama) or split halves (neox, qwen2); the dimensions
// past `dims` pass through unchanged.
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
  // The (cos, sin) pairs of positions pos0 .. pos0+T-1: [T, dims/2, 2], the
  // same floats Apply computes. A batch computes them once and rotates every
  // layer's queries and keys with ApplyTable (decode: 1 position instead of
  // 2 x n_layer evaluations of dims/2 sin/cos).
  void Table(int pos0, int T, std::vector<float>* cs) const;
  int table_stride() const { return dims_; }  // floats per position in Table
  // Apply with one position's row of Table (bit-identical to Apply).
  void ApplyTable(float* x, int n_heads, int head_dim, const float* cs) const;
  // The angle of pair i at position pos.
  double Theta(int i, int pos) const;
  // The (cos, sin) pairs that turn a rotated head by `delta` positions
  // (fractional allowed: the angle is linear in the position), without the
  // cos/sin scale, into cs [table_stride()]: ApplyTable with them makes a
  // key Apply rotated at p the one Apply would rotate at p + delta (a
  // re-base, kv/rope_map.h).
  void TurnTable(double delta, float* cs) const;
  // TurnTable and ApplyTable at once.
  void Turn(float* x, int n_heads, int head_dim, double delta) const;
  double mscale() const { return mscale_; }
  // YaRN's correction dims (0, 0 unless yarn).
  float corr_low() const { return corr_[0]; }
  float corr_high() const { return corr_[1]; }

 private:
  int dims_ = 0;
  kernels::RopeMode mode_ = kernels::RopeMode::kNormal;
  double freq_scale_ = 1, mscale_ = 1;
  bool yarn_ = false;
  float corr_[2] = {0, 0};
  std::vector<double> inv_freq_;  // base^(-2i/dims) / factor_i
  std::vector<double> ramp_;      // yarn: r_i
};

}  // namespace kvtrim::model
