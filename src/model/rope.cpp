#include "model/rope.h"

#include <algorithm>
#include <cmath>

namespace kvtrim::model {
namespace {

// ggml_rope_yarn_corr_dim: the dimension whose wavelength fits `n_rot`
// turns into the original context (float, as ggml computes it).
float CorrDim(int n_dims, int n_ctx_orig, float n_rot, float base) {
  return n_dims * std::log(n_ctx_orig / (n_rot * 2 * static_cast<float>(M_PI))) / (2 * std::log(base));
}

}  // namespace

Rope::Rope(const ModelConfig& c, const std::vector<float>& freq_factors)
    : dims_(c.rope_dims),
      mode_(c.rope_mode),
      freq_scale_(c.rope_freq_scale),
      mscale_(c.rope_attn_factor),
      yarn_(c.rope_scaling == "yarn"),
      inv_freq_(c.rope_dims / 2) {
  for (int i = 0; i < dims_ / 2; ++i) {
    inv_freq_[i] = std::pow(static_cast<double>(c.rope_base), -2.0 * i / dims_);
    if (!freq_factors.empty()) inv_freq_[i] /= freq_factors[i];
  }
  if (!yarn_) return;
  const float beta_fast = 32.f, beta_slow = 1.f;
  corr_[0] = std::max(0.f, std::floor(CorrDim(dims_, c.rope_orig_ctx, beta_fast, c.rope_base)));
  corr_[1] = std::min(static_cast<float>(dims_ - 1), std::ceil(CorrDim(dims_, c.rope_orig_ctx, beta_slow, c.rope_base)));
  ramp_.resize(dims_ / 2);
  for (int i = 0; i < dims_ / 2; ++i) {
    const float y = (i - corr_[0]) / std::max(0.001f, corr_[1] - corr_[0]);
    ramp_[i] = 1 - std::min(1.f, std::max(0.f, y));
  }
  mscale_ *= 1.0 + 0.1 * std::log(1.0 / freq_scale_);
}

double Rope::Theta(int i, int pos) const {
  const double extrap = pos * inv_freq_[i], interp = freq_scale_ * extrap;
  return yarn_ ? interp * (1 - ramp_[i]) + extrap * ramp_[i] : interp;
}

void Rope::Table(int pos0, int T, std::vector<float>* cs) const {
  const int half = dims_ / 2;
  cs->resize(static_cast<size_t>(T) * dims_);
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < half; ++i) {
      const double theta = Theta(i, pos0 + t);
      float* o = &(*cs)[static_cast<size_t>(t) * dims_ + 2 * i];
      o[0] = static_cast<float>(std::cos(theta) * mscale_);
      o[1] = static_cast<float>(std::sin(theta) * mscale_);
    }
}

void Rope::ApplyTable(float* x, int n_heads, int head_dim, const float* cs) const {
  const int half = dims_ / 2;
  const bool normal = mode_ == kernels::RopeMode::kNormal;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    for (int i = 0; i < half; ++i) {
      const float c = cs[2 * i], s = cs[2 * i + 1];
      const int i0 = normal ? 2 * i : i, i1 = normal ? 2 * i + 1 : i + half;
      const float a = v[i0], b = v[i1];
      v[i0] = a * c - b * s;
      v[i1] = a * s + b * c;
    }
  }
}

void Rope::TurnTable(double delta, float* cs) const {
  for (int i = 0; i < dims_ / 2; ++i) {
    const double theta = Theta(i, 1) * delta;  // Theta is linear in the position
    cs[2 * i] = static_cast<float>(std::cos(theta));
    cs[2 * i + 1] = static_cast<float>(std::sin(theta));
  }
}

void Rope::Turn(float* x, int n_heads, int head_dim, double delta) const {
  std::vector<float> cs(static_cast<size_t>(dims_));
  TurnTable(delta, cs.data());
  ApplyTable(x, n_heads, head_dim, cs.data());
}

void Rope::Apply(float* x, int n_heads, int head_dim, int pos) const {
  std::vector<float> cs;
  Table(pos, 1, &cs);
  ApplyTable(x, n_heads, head_dim, cs.data());
}

}  // namespace kvtrim::model
