#include "kernels/ops.h"

#include <algorithm>
#include <cmath>

#include "kernels/targets.h"
#if KVTRIM_BUILD_AVX2_SLEEF
#include <sleef.h>  // vectorized expf, 1.0 ULP (Debian libsleef-dev)
#endif

namespace kvtrim::kernels {

void RmsNorm(const float* x, const float* w, int n, float eps, float* out) {
  float ss = 0.f;
  for (int i = 0; i < n; ++i) ss += x[i] * x[i];
  float scale = 1.f / std::sqrt(ss / n + eps);
  for (int i = 0; i < n; ++i) out[i] = x[i] * scale * w[i];
}

void Softmax(float* x, int n) {
  if (n <= 0) return;
  float m = *std::max_element(x, x + n);
  if (m == -INFINITY) {  // nothing visible: define as all-zero weights
    std::fill(x, x + n, 0.f);
    return;
  }
  float inv = 1.f / ExpShiftSum(x, n, m);
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

float ExpShiftSum(float* x, int n, float m) {
  float s = 0.f;
  int i = 0;
#ifdef KVTRIM_BUILD_AVX512_SLEEF
  // 16 lanes where the build targets AVX-512 (the same Sleef algorithm: each
  // exp equals the 8-lane one's; only the sum's order differs). The
  // attention's softmax exps were 6-9% of an Attention Matching chunked
  // prefill's time at 4k on the SmolLM2-135M shape (perf), all in the 8-lane exp.
  if (n >= 16) {
    const __m512 wm = _mm512_set1_ps(m);
    __m512 ws = _mm512_setzero_ps();
    for (; i + 16 <= n; i += 16) {
      const __m512 e = Sleef_expf16_u10avx512f(_mm512_sub_ps(_mm512_loadu_ps(x + i), wm));
      _mm512_storeu_ps(x + i, e);
      ws = _mm512_add_ps(ws, e);
    }
    s = _mm512_reduce_add_ps(ws);
  }
#endif
#ifdef KVTRIM_BUILD_AVX2_SLEEF
  __m256 vm = _mm256_set1_ps(m), vs = _mm256_setzero_ps();
  for (; i + 8 <= n; i += 8) {
    __m256 e = Sleef_expf8_u10avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
    _mm256_storeu_ps(x + i, e);
    vs = _mm256_add_ps(vs, e);
  }
  float lanes[8];
  _mm256_storeu_ps(lanes, vs);
  for (float l : lanes) s += l;
#endif
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - m);
    s += x[i];
  }
  return s;
}

void SwiGlu(float* a, const float* b, int n) {
  int i = 0;
#ifdef KVTRIM_BUILD_AVX2_SLEEF
  // 8 at a time with SLEEF's expf (1.0 ULP, as libm's): the scalar loop's
  // libm calls were 5% of a Q4_0 decode step (perf, needle v1).
  const __m256 one = _mm256_set1_ps(1.f), neg = _mm256_set1_ps(-0.f);
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(a + i);
    const __m256 e = Sleef_expf8_u10avx2(_mm256_xor_ps(x, neg));
    _mm256_storeu_ps(a + i, _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(one, e)), _mm256_loadu_ps(b + i)));
  }
#endif
  for (; i < n; ++i) a[i] = a[i] / (1.f + std::exp(-a[i])) * b[i];
}

void Rope(float* x, int n_heads, int head_dim, int rot_dims, int pos, float freq_base, RopeMode mode) {
  const int half = rot_dims / 2;
  for (int i = 0; i < half; ++i) {
    double theta = pos * std::pow(static_cast<double>(freq_base), -2.0 * i / rot_dims);
    float c = static_cast<float>(std::cos(theta)), s = static_cast<float>(std::sin(theta));
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + h * head_dim;
      int i0 = mode == RopeMode::kNormal ? 2 * i : i;
      int i1 = mode == RopeMode::kNormal ? 2 * i + 1 : i + half;
      float a = v[i0], b = v[i1];
      v[i0] = a * c - b * s;
      v[i1] = a * s + b * c;
    }
  }
}

}  // namespace kvtrim::kernels
