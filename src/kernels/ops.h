// Elementwise and normalization kernels.
#pragma once

namespace kvtrim::kernels {

// out[n] = x / rms(x) * w
void RmsNorm(const float* x, const float* w, int n, float eps, float* out);
// In-place softmax over n values; returns the max (for callers that need it).
void Softmax(float* x, int n);
// x[i] <- exp(x[i] - m) in place; returns the sum (softmax without the
// normalization, for callers that normalize later).
float ExpShiftSum(float* x, int n, float m);
// a[n] = silu(a) * b
void SwiGlu(float* a, const float* b, int n);

enum class RopeMode { kNormal, kNeox };  // adjacent pairs / split halves
// Rotate n_heads vectors of head_dim at position pos (rot_dims leading dims).
void Rope(float* x, int n_heads, int head_dim, int rot_dims, int pos, float freq_base, RopeMode mode);

}  // namespace kvtrim::kernels
