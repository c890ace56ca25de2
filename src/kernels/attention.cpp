#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/quant.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define KVTRIM_ATT_AVX2 1
#endif

namespace kvtrim::kernels {
namespace {

#ifdef KVTRIM_ATT_AVX2
inline float Hsum8(__m256 v) {
  __m128 lo = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}
#endif

inline float DotF32(const float* a, const float* b, int d) {
#ifdef KVTRIM_ATT_AVX2
  __m256 acc = _mm256_mul_ps(_mm256_loadu_ps(a), _mm256_loadu_ps(b));
  for (int i = 8; i < d; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  return Hsum8(acc);
#else
  float acc = 0.f;
  for (int i = 0; i < d; ++i) acc += a[i] * b[i];
  return acc;
#endif
}

// d a multiple of 8 (and at most kMaxRow for block types): the whole step
// inlined. F32 rows are read in place; other rows are dequantized once per
// entry into a small buffer and shared by the group's query heads.
constexpr int kMaxRow = 512;

void AttendOneFast(const KvView& kv, const float* q, int G, float scale, float* out, float* scratch,
                   const ProbObserver* obs) {
  const int n = kv.n, d = kv.d;
  const bool f32 = kv.type == GgmlType::F32;
  float buf[kMaxRow];
  auto row = [&](const uint8_t* base, int j) -> const float* {
    const uint8_t* r = base + kv.row_bytes * j;
    if (f32) return reinterpret_cast<const float*>(r);
    DequantRow(kv.type, r, buf, d);
    return buf;
  };
  for (int j = 0; j < n; ++j) {  // scores: each key row read once for the group
    const float* k = row(kv.k, j);
    for (int g = 0; g < G; ++g) scratch[static_cast<size_t>(g) * n + j] = DotF32(k, q + g * d, d) * scale + kv.logw[j];
  }
  for (int g = 0; g < G; ++g) {
    Softmax(scratch + static_cast<size_t>(g) * n, n);
    if (obs) (*obs)(0, g, scratch + static_cast<size_t>(g) * n, n);
  }
  std::fill(out, out + G * d, 0.f);
  for (int j = 0; j < n; ++j) {  // values: each row read once for the group
    const float* v = row(kv.v, j);
    for (int g = 0; g < G; ++g) {
      const float a = scratch[static_cast<size_t>(g) * n + j];
      float* o = out + g * d;
      for (int i = 0; i < d; ++i) o[i] += a * v[i];  // vectorized by the compiler
    }
  }
}

}  // namespace

void AttendOne(const KvView& kv, const float* q, int G, float scale, float* out, float* scratch,
               const ProbObserver* obs) {
  if (kv.d % 8 == 0 && (kv.type == GgmlType::F32 || kv.d <= kMaxRow)) {
    return AttendOneFast(kv, q, G, scale, out, scratch, obs);
  }
  const int n = kv.n, d = kv.d;
  for (int j = 0; j < n; ++j) {  // scores, key rows read once for the group
    const uint8_t* krow = kv.k + kv.row_bytes * j;
    const float b = kv.logw[j];
    for (int g = 0; g < G; ++g) scratch[g * n + j] = DotRow(kv.type, krow, q + g * d, d) * scale + b;
  }
  for (int g = 0; g < G; ++g) {
    Softmax(scratch + g * n, n);
    if (obs) (*obs)(0, g, scratch + g * n, n);
  }
  std::fill(out, out + G * d, 0.f);
  for (int j = 0; j < n; ++j) {
    const uint8_t* vrow = kv.v + kv.row_bytes * j;
    for (int g = 0; g < G; ++g) AxpyRow(kv.type, vrow, scratch[g * n + j], out + g * d, d);
  }
}

void AttendCausal(const KvView& kv, const float* q, int T, int G, int q_stride, int n_visible0,
                  float scale, float* out, int out_stride, const ProbObserver* obs) {
  const int d = kv.d;
  const int n_total = std::min(kv.n, n_visible0 + T);
  // Float copies of the rows: the GEMM wants floats (free for an F32 cache).
  std::vector<float> kbuf, vbuf;
  const float* K = reinterpret_cast<const float*>(kv.k);
  const float* V = reinterpret_cast<const float*>(kv.v);
  if (kv.type != GgmlType::F32) {
    kbuf.resize(static_cast<size_t>(n_total) * d);
    vbuf.resize(static_cast<size_t>(n_total) * d);
    for (int j = 0; j < n_total; ++j) {
      DequantRow(kv.type, kv.k + kv.row_bytes * j, &kbuf[static_cast<size_t>(j) * d], d);
      DequantRow(kv.type, kv.v + kv.row_bytes * j, &vbuf[static_cast<size_t>(j) * d], d);
    }
    K = kbuf.data();
    V = vbuf.data();
  }
  // Query positions per block: 64 score rows keep the [rows, n] score block
  // in L2 (BM_PrefillAttentionHead, n 976, G 2: 6.4 ms with 256 rows, 5.6 ms
  // with 64; docs/kernels.md).
  const int Tb = std::max(1, 64 / G);
  std::vector<float> qb(static_cast<size_t>(Tb) * G * d), ob(static_cast<size_t>(Tb) * G * d);
  std::vector<float> s, inv(static_cast<size_t>(Tb) * G);  // inv: 1 / softmax sum per row
  std::vector<float> probs(obs ? n_total : 0);               // one normalized row for the taps
  for (int t0 = 0; t0 < T; t0 += Tb) {
    const int t1 = std::min(T, t0 + Tb), rows = (t1 - t0) * G;
    const int nv = std::min(n_total, n_visible0 + t1);  // entries seen by the block's last query
    for (int t = t0; t < t1; ++t)  // qb: [rows, d], row = (t - t0) * G + g
      std::copy(q + static_cast<size_t>(t) * q_stride, q + static_cast<size_t>(t) * q_stride + G * d,
                &qb[static_cast<size_t>(t - t0) * G * d]);
    s.resize(static_cast<size_t>(rows) * nv);
    GemmABt(rows, nv, d, qb.data(), d, K, d, s.data(), nv);  // s: [rows, nv]
    for (int t = t0; t < t1; ++t) {
      const int vis = std::min(nv, n_visible0 + t + 1);
      for (int g = 0; g < G; ++g) {
        const int r = (t - t0) * G + g;
        float* row = &s[static_cast<size_t>(r) * nv];
        float m = -INFINITY;
        for (int j = 0; j < vis; ++j) {  // scaled scores and their max in one pass
          row[j] = row[j] * scale + kv.logw[j];
          m = std::max(m, row[j]);
        }
        // exp without normalizing: the output row is scaled instead (d
        // values rather than vis), the same arithmetic with or without taps
        // (so ratio-1 compression reproduces the full cache bit for bit); a
        // tap gets the normalized row in a copy. The masked tail gets weight
        // 0 without an exp.
        const float sum = m == -INFINITY ? 0.f : ExpShiftSum(row, vis, m);
        if (m == -INFINITY) std::fill(row, row + vis, 0.f);
        inv[r] = sum > 0.f ? 1.f / sum : 0.f;
        std::fill(row + vis, row + nv, 0.f);
        if (obs) {
          for (int j = 0; j < vis; ++j) probs[j] = row[j] * inv[r];
          (*obs)(t, g, probs.data(), vis);
        }
      }
    }
    GemmAB(rows, d, nv, s.data(), nv, V, d, ob.data(), d);  // ob: [rows, d]
    for (int r = 0; r < rows; ++r)
      for (int i = 0; i < d; ++i) ob[static_cast<size_t>(r) * d + i] *= inv[r];
    for (int t = t0; t < t1; ++t)
      std::copy(&ob[static_cast<size_t>(t - t0) * G * d], &ob[static_cast<size_t>(t - t0 + 1) * G * d],
                out + static_cast<size_t>(t) * out_stride);
  }
}

}  // namespace kvtrim::kernels
