// The tile products of the causal attention pass in bf16 (AVX512-BF16's
// vdpbf16ps: 32 products a instruction with f32 accumulation, twice the f32
// FMA's): S = Q K^T and O += P V over a key tile, the operands rounded to
// bf16 (round to nearest even), every sum in f32. Chosen at run time
// (HasBf16Tiles); the f32 tiles (Eigen) stay the reference and the fallback.
//
// Hand-written: Eigen's bfloat16 products convert to float element by
// element (no vdpbf16ps), and no Debian library offers a bf16 GEMM whose
// packing can be reused across the query blocks of one pass.
#pragma once

#include <cstdint>

namespace kvtrim::kernels {

// True where the CPU and this build have AVX512-BF16 (read once).
bool HasBf16Tiles();
// Whether a head dimension d has the bf16 tiles (a multiple of 32, at most
// kMaxBf16TileDim: PackKeysBf16 stages one key's pairs on the stack).
inline constexpr int kMaxBf16TileDim = 1024;
inline bool Bf16TileDim(int d) { return d > 0 && d % 32 == 0 && d <= kMaxBf16TileDim; }

// Words (uint32_t, one bf16 pair each) of the packed forms, for scratch sizes.
inline int Bf16KeyPanelWords(int w, int d) { return (w + 15) / 16 * 16 * (d / 2); }
inline int Bf16ValuePanelWords(int w, int d) { return (w + 1) / 2 * d; }

// Rows [rows, d] (stride ld) as bf16 pairs [rows, d / 2] (stride d / 2).
void PackRowsBf16(const float* x, int rows, int ld, int d, uint32_t* out);
// Keys [w, d] (stride d; Bf16TileDim(d)) as a panel [ceil(w / 16)][d / 2][16]: for a group
// of 16 keys and a pair of dimensions, the 16 keys' pairs (zero past w).
void PackKeysBf16(const float* K, int w, int d, uint32_t* kp);
// Values [w, d] (stride d) as a panel [ceil(w / 2)][d]: for a pair of
// entries, each dimension's two values side by side (zero past w).
void PackValuesBf16(const float* V, int w, int d, uint32_t* vp);

// s[r, j] = q_r . k_j for rows [0, rows) and keys [0, w) (s's row stride ld_s).
void ScoresBf16(const uint32_t* qp, int rows, const uint32_t* kp, int w, int d, float* s, int ld_s);
// o[r, :] += sum_j p[r, j] v_j over keys [0, w); p's rows are rounded to
// bf16 into pp ([rows, ceil(w / 2)] words of scratch).
void AccumulatePvBf16(const float* p, int rows, int ld_p, const uint32_t* vp, int w, int d, float* o, int ld_o,
                      uint32_t* pp);
// The same over probabilities already in bf16 pairs (pp: [rows, ceil(w / 2)]).
void AccumulatePackedPvBf16(const uint32_t* pp, int rows, const uint32_t* vp, int w, int d, float* o, int ld_o);

// One row of a key tile's online softmax, its probabilities written as bf16
// pairs for AccumulatePackedPvBf16: x_j = s_j * scale + b_j over the row's
// vis visible entries (vis <= w), m_new = max(m, max_j x_j), pp's
// ceil(w / 2) words = bf16(exp(x_j - m_new)) with 0 from vis on; returns
// the f32 sum of the exps (0 when m_new is -inf: nothing with weight yet,
// every word 0). exp here is a polynomial within 2e-7 of the true value
// relative (ExpBelowZero), far inside bf16's 2^-8 rounding.
float SoftmaxRowBf16(const float* s, int vis, int w, float scale, const float* b, float m, float* m_new,
                     uint32_t* pp);
// exp(y) for y <= 0 (y = -inf gives 0) within 2e-7 relative: the
// polynomial SoftmaxRowBf16 uses, exposed for its test.
float ExpBelowZero(float y);

}  // namespace kvtrim::kernels
