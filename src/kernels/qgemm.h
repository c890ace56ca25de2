// Integer matrix products on Q8_0/Q4_0 weight rows, read in their stored
// blocks (no dequantized copy): the activations are quantized once per batch
// into blocks of 32 int16 codes with one float scale, and each block product
// is an exact int32 dot, scaled by d_w * d_x and summed in float:
//   y[t, r] = sum_b d_w(r, b) d_x(t, b) sum_{j<32} q_w(r, b, j) q_x(t, b, j).
// int16 rather than int8 activations: int8 (llama.cpp's Q8 activations) moves
// the logits of the needle models by up to 0.07 against the float64 goldens,
// over the 0.05 they are held to; int16 (step max|x| / 32767) is 256x finer and
// costs no more on AVX2 (two madd_epi16 per block against sign + maddubs + madd
// for int8). Paths (kernels/cpu.h): scalar; AVX2 (4 rows x 2 tokens register
// tile); AVX-512 VNNI (vpdpwssd, one block per zmm, 4 x 4 tile). All paths give
// the same int32 block sums; only the float summation order differs.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/matmul.h"

namespace kvtrim::kernels {

// Quantized activations of a batch: T rows of nb blocks.
struct QActs {
  int T = 0, nb = 0;
  std::vector<int16_t> q;     // [T, nb * 32]
  std::vector<float> d;       // [T, nb] (+ 16 floats of padding)
  std::vector<int32_t> hsum;  // [T, nb * 2] sums of the codes of each half block
};

// True where QGemmRows handles w: Q8_0/Q4_0 with cols a multiple of 32.
bool QGemmSupports(const WeightView& w);
// a <- x [T, cols] (cols a multiple of 32): per block d = max|x| / 32767,
// q = round-to-nearest-even(x / d) (q = 0 and d = 0 for an all-zero block);
// the pool, if given, splits the tokens.
void QuantizeActs(const float* x, int T, int cols, QActs* a, ThreadPool* pool = nullptr);
// y[t * ldy + r] = row r of w . token t of a, for r in [r0, r1) and every t.
void QGemmRows(const WeightView& w, const QActs& a, int r0, int r1, float* y, int ldy);

// Decode on the other block types (Q4_1, Q5_0, Q5_1, Q2_K..Q6_K): one token's
// int16 activations against each row, integer products per group of 32 with
// the block's float scales (kquant.h DotBlocksQ16Avx2). Available on the AVX2
// and AVX-512 paths of an AVX2 build; elsewhere QGemvBlockSupports is false
// and MatMul keeps the float dot.
bool QGemvBlockSupports(const WeightView& w);
void QGemvBlockRows(const WeightView& w, const QActs& a, int r0, int r1, float* y);

}  // namespace kvtrim::kernels
