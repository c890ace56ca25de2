// One decode step over a chunk of stored entries (AttendChunk), written out
// by hand for AVX2: Eigen's GEMM on 3-row matrices (a decode step's G query
// heads) ran at a quarter of the FMA rate and left f16/q8_0 decode no faster
// than f32 (docs/kernels.md), and no Debian library has a decode-attention
// kernel over ggml's row types.
//
// Online softmax over tiles of kTile entries: a tile's keys and values are
// dequantized once into f32 buffers (DequantRows), scored 8 entries at a
// time (one accumulator per entry, reduced together: no horizontal sum per
// dot product), and P.V accumulated 32 dimensions at a time.
#include <algorithm>
#include <cmath>

#include "kernels/attention_decode.h"
#include "kernels/attention_decode_avx512.h"
#include "kernels/ops.h"
#include "kernels/quant.h"

#include "kernels/targets.h"

namespace kvtrim::kernels {
namespace {

#ifdef KVTRIM_BUILD_AVX2_FMA
constexpr int kTile = 32;     // entries per tile
constexpr int kMaxD = 256;    // head dims the stack buffers hold
constexpr int kMaxG = 16;     // query heads per KV head

// The 8 horizontal sums of a[0..7], in order, as one vector.
inline __m256 Reduce8(const __m256* a) {
  const __m256 h01 = _mm256_hadd_ps(a[0], a[1]), h23 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 h45 = _mm256_hadd_ps(a[4], a[5]), h67 = _mm256_hadd_ps(a[6], a[7]);
  const __m256 h0123 = _mm256_hadd_ps(h01, h23), h4567 = _mm256_hadd_ps(h45, h67);
  // h0123 = [s0a s1a s2a s3a | s0b s1b s2b s3b] (a, b: the two 128-bit halves)
  const __m256 lo = _mm256_permute2f128_ps(h0123, h4567, 0x20), hi = _mm256_permute2f128_ps(h0123, h4567, 0x31);
  return _mm256_add_ps(lo, hi);
}

// s[e] = dot(K[e], qg) * scale + b[e] for e in [0, w), w a multiple of 8.
void ScoreTile(const float* K, int d, int w, const float* qg, float scale, const float* b, float* s) {
  const __m256 vs = _mm256_set1_ps(scale);
  for (int e0 = 0; e0 < w; e0 += 8) {
    __m256 acc[8];
    for (auto& a : acc) a = _mm256_setzero_ps();
    for (int i = 0; i < d; i += 8) {
      const __m256 qv = _mm256_loadu_ps(qg + i);
      for (int e = 0; e < 8; ++e) acc[e] = _mm256_fmadd_ps(_mm256_loadu_ps(K + (e0 + e) * d + i), qv, acc[e]);
    }
    _mm256_storeu_ps(s + e0, _mm256_fmadd_ps(Reduce8(acc), vs, _mm256_loadu_ps(b + e0)));
  }
}

// o[i0, i0 + 8 NV) += sum_e p[e] * V[e][i0, ...) over e in [0, w): NV
// accumulators held in registers (a constant count, so none is spilled).
template <int NV>
void AccumulateSlice(const float* V, int d, int w, const float* p, float* o) {
  __m256 acc[NV], acc2[NV];  // even and odd entries: twice the FMA chains in flight
  for (int k = 0; k < NV; ++k) acc[k] = _mm256_loadu_ps(o + 8 * k), acc2[k] = _mm256_setzero_ps();
  int e = 0;
  for (; e + 2 <= w; e += 2) {
    const __m256 pe = _mm256_broadcast_ss(p + e), pf = _mm256_broadcast_ss(p + e + 1);
    for (int k = 0; k < NV; ++k) {
      acc[k] = _mm256_fmadd_ps(pe, _mm256_loadu_ps(V + e * d + 8 * k), acc[k]);
      acc2[k] = _mm256_fmadd_ps(pf, _mm256_loadu_ps(V + (e + 1) * d + 8 * k), acc2[k]);
    }
  }
  for (; e < w; ++e) {
    const __m256 pe = _mm256_broadcast_ss(p + e);
    for (int k = 0; k < NV; ++k) acc[k] = _mm256_fmadd_ps(pe, _mm256_loadu_ps(V + e * d + 8 * k), acc[k]);
  }
  for (int k = 0; k < NV; ++k) _mm256_storeu_ps(o + 8 * k, _mm256_add_ps(acc[k], acc2[k]));
}

// o[0, d) += sum_e p[e] * V[e] over e in [0, w), 32 dimensions at a time.
void AccumulateTile(const float* V, int d, int w, const float* p, float* o) {
  int i0 = 0;
  for (; i0 + 32 <= d; i0 += 32) AccumulateSlice<4>(V + i0, d, w, p, o + i0);
  for (; i0 < d; i0 += 8) AccumulateSlice<1>(V + i0, d, w, p, o + i0);
}

// max of x[0, w), w a multiple of 8.
float MaxOf(const float* x, int w) {
  __m256 m = _mm256_loadu_ps(x);
  for (int i = 8; i < w; i += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}

// Rows [j0, j0 + w) of keys or values as f32 into buf (w rounded up to 8
// with zero rows, whose log-weight the caller makes -inf).
void TileRows(const KvView& kv, const uint8_t* base, int j0, int w, int w8, float* buf) {
  const int d = kv.d;
  DequantRows(kv.type, base + kv.row_bytes * j0, kv.row_bytes, w, buf, d);
  std::fill(buf + w * d, buf + w8 * d, 0.f);
}

bool DecodeAvx2(const KvView& kv, const float* q, int G, float scale, float* out, float* ml) {
  const int d = kv.d, n = kv.n;
  if (d % 8 != 0 || d > kMaxD || G > kMaxG) return false;
  alignas(32) float kt[kTile * kMaxD], vt[kTile * kMaxD], s[kMaxG * kTile], b[kTile];
  float m[kMaxG], l[kMaxG];
  std::fill(m, m + G, -INFINITY);
  std::fill(l, l + G, 0.f);
  std::fill(out, out + G * d, 0.f);
  for (int j0 = 0; j0 < n; j0 += kTile) {
    const int w = std::min(kTile, n - j0), w8 = (w + 7) / 8 * 8;
    std::copy(kv.logw + j0, kv.logw + j0 + w, b);
    std::fill(b + w, b + w8, -INFINITY);
    TileRows(kv, kv.k, j0, w, w8, kt);
    bool any = false;
    for (int g = 0; g < G; ++g) {
      float* sg = s + g * kTile;
      ScoreTile(kt, d, w8, q + g * d, scale, b, sg);
      const float mt = MaxOf(sg, w8);
      const float m_new = std::max(m[g], mt);
      if (m_new == -INFINITY) {  // nothing with weight yet: p = 0
        std::fill(sg, sg + w8, 0.f);
        continue;
      }
      any = true;
      if (m_new != m[g]) {
        const float alpha = std::exp(m[g] - m_new);  // 0 for the first tile with weight
        for (int i = 0; i < d; ++i) out[g * d + i] *= alpha;
        l[g] *= alpha;
        m[g] = m_new;
      }
      l[g] += ExpShiftSum(sg, w8, m_new);
    }
    if (!any) continue;
    TileRows(kv, kv.v, j0, w, w8, vt);
    for (int g = 0; g < G; ++g) AccumulateTile(vt, d, w, s + g * kTile, out + g * d);
  }
  for (int g = 0; g < G; ++g) {
    const float inv = l[g] > 0.f ? 1.f / l[g] : 0.f;  // all -inf: output 0, as AttendCausalMl
    for (int i = 0; i < d; ++i) out[g * d + i] *= inv;
    ml[2 * g] = m[g];
    ml[2 * g + 1] = l[g];
  }
  return true;
}

// AttendOne for stored types with its probabilities (a tap): the scores of
// all n entries into scratch [G, n] a tile at a time, softmax, the tap, then
// P.V over the value tiles.
bool AttendOneAvx2(const KvView& kv, const float* q, int G, float scale, float* out, float* scratch,
                   const TileObserver* obs) {
  const int d = kv.d, n = kv.n;
  if (d % 8 != 0 || d > kMaxD || n == 0) return false;
  alignas(32) float kt[kTile * kMaxD], s[kTile], b[kTile];
  for (int j0 = 0; j0 < n; j0 += kTile) {
    const int w = std::min(kTile, n - j0), w8 = (w + 7) / 8 * 8;
    std::copy(kv.logw + j0, kv.logw + j0 + w, b);
    std::fill(b + w, b + w8, -INFINITY);
    TileRows(kv, kv.k, j0, w, w8, kt);
    for (int g = 0; g < G; ++g) {
      ScoreTile(kt, d, w8, q + g * d, scale, b, s);
      std::copy(s, s + w, scratch + static_cast<size_t>(g) * n + j0);
    }
  }
  for (int g = 0; g < G; ++g) Softmax(scratch + static_cast<size_t>(g) * n, n);
  if (obs) (*obs)(WholeTile(scratch, G, n));
  std::fill(out, out + G * d, 0.f);
  for (int j0 = 0; j0 < n; j0 += kTile) {
    const int w = std::min(kTile, n - j0);
    TileRows(kv, kv.v, j0, w, w, kt);
    for (int g = 0; g < G; ++g) AccumulateTile(kt, d, w, scratch + static_cast<size_t>(g) * n + j0, out + g * d);
  }
  return true;
}
#endif

}  // namespace

bool AttendOneTiled(const KvView& kv, const float* q, int G, float scale, float* out, float* scratch,
                    const TileObserver* obs) {
#ifdef KVTRIM_BUILD_AVX2_FMA
  return AttendOneAvx2(kv, q, G, scale, out, scratch, obs);
#else
  (void)kv, (void)q, (void)G, (void)scale, (void)out, (void)scratch, (void)obs;
  return false;
#endif
}

int DecodeChunkLength(int n_max, int n_heads, int threads) {
  const int want = std::max((n_max + kDecodeChunk - 1) / kDecodeChunk,
                            (2 * std::max(threads, 1) + std::max(n_heads, 1) - 1) / std::max(n_heads, 1));
  const int L = (n_max + want - 1) / want;
  return std::clamp((L + 31) / 32 * 32, kMinDecodeChunk, kDecodeChunk);
}

int DecodeChunks(int n, int L) { return std::max(1, (n + L - 1) / L); }

void MergeChunks(const float* outs, const float* mls, int chunks, int G, int d, float* out) {
  for (int g = 0; g < G; ++g) {
    float M = -INFINITY;
    for (int c = 0; c < chunks; ++c) M = std::max(M, mls[static_cast<size_t>(c) * G * 2 + 2 * g]);
    float* o = out + static_cast<size_t>(g) * d;
    std::fill(o, o + d, 0.f);
    if (M == -INFINITY) continue;  // nothing visible (every log-weight -inf): zeros, as AttendCausalMl
    float total = 0.f;
    for (int c = 0; c < chunks; ++c) {
      const float m = mls[static_cast<size_t>(c) * G * 2 + 2 * g], l = mls[static_cast<size_t>(c) * G * 2 + 2 * g + 1];
      if (m == -INFINITY) continue;
      const float w = std::exp(m - M) * l;
      total += w;
      const float* oc = outs + (static_cast<size_t>(c) * G + g) * d;
      for (int i = 0; i < d; ++i) o[i] += w * oc[i];
    }
    for (int i = 0; i < d; ++i) o[i] /= total;
  }
}

void AttendDecode(ThreadPool& pool, const std::vector<KvView>& heads, const float* q, int G, float scale, float* att) {
  const int H = static_cast<int>(heads.size());
  if (H == 0) return;
  const int d = heads[0].d, gd = G * d;
  int n_max = 0;
  for (const KvView& v : heads) n_max = std::max(n_max, v.n);
  const int L = DecodeChunkLength(n_max, H, pool.size());
  const int C = DecodeChunks(n_max, L);
  // The calling thread's buffers, reused by every step; the workers write
  // through these pointers (a thread_local named inside the loop would be
  // each worker's own).
  thread_local std::vector<float> outs_buf, mls_buf;
  outs_buf.resize(static_cast<size_t>(H) * C * gd);
  mls_buf.resize(static_cast<size_t>(H) * C * G * 2);
  float* const outs = outs_buf.data();
  float* const mls = mls_buf.data();
  pool.ParallelFor(static_cast<int64_t>(H) * C, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int h = static_cast<int>(i / C), c = static_cast<int>(i % C);
      const KvView& view = heads[h];
      if (view.n == 0 || c >= DecodeChunks(view.n, L)) continue;
      AttendChunk(view, c, L, &q[static_cast<size_t>(h) * gd], G, scale, &outs[static_cast<size_t>(i) * gd],
                  &mls[static_cast<size_t>(i) * G * 2]);
    }
  });
  for (int h = 0; h < H; ++h) {
    float* out = att + static_cast<size_t>(h) * gd;
    if (heads[h].n == 0) {
      std::fill(out, out + gd, 0.f);
      continue;
    }
    MergeChunks(&outs[static_cast<size_t>(h) * C * gd], &mls[static_cast<size_t>(h) * C * G * 2],
                DecodeChunks(heads[h].n, L), G, d, out);
  }
}

void AttendChunk(const KvView& kv, int c, int L, const float* q, int G, float scale, float* out, float* ml) {
  const int j0 = c * L, n = std::min(L, kv.n - j0);
  const KvView sub = SubView(kv, j0, n);
  if (DecodeAvx512Active() && DecodeChunkAvx512(sub, q, G, scale, out, ml)) return;
#ifdef KVTRIM_BUILD_AVX2_FMA
  if (DecodeAvx2(sub, q, G, scale, out, ml)) return;
#endif
  AttendCausalMl(sub, q, 1, G, G * kv.d, n - 1, scale, out, G * kv.d, ml);
}

}  // namespace kvtrim::kernels
