// Integer prefill products on Q8_0/Q4_0 weights repacked at load time so the
// vector lanes hold weight ROWS (the standard GEMM micro-kernel layout):
//   codes:  [tile][block b][pair p < 16][row i < 16][2]  int8, the codes
//           q(16 tile + i, b, 2p) and q(16 tile + i, b, 2p + 1) side by side
//           (Q4_0 nibbles stored as nibble - 8); one pair group is 32 bytes,
//           one zmm of 16 int16 pairs after sign extension;
//   scales: [tile][block b][row i < 16]  float, d_w(16 tile + i, b).
// Q4_0 keeps 4-bit codes (nibbles = true): [tile][block][group g < 8][row i][2]
// bytes, byte (i, e) = (q(i, b, 2g + e) + 8) | (q(i, b, 2g + 16 + e) + 8) << 4:
// the low nibbles are pair g, the high nibbles pair g + 8 (256 bytes per block
// of 16 rows); the kernels take the codes unsigned and subtract 8 x the
// token's block sum of activation codes (QActs::hsum) from the int32 sums.
// Rows past the last one are padded with zero codes and zero scales.
// The activations are qgemm.h's QActs (int16 codes, one scale per block of
// 32), so the int32 block sums equal the decode kernels':
//   y[t, r] = sum_b d_w(r, b) d_x(t, b) sum_{j<32} q_w(r, b, j) q_x(t, b, j).
// Per block and (row vector, token) the kernels do 16 vpdpwssd (AVX-512 VNNI,
// the token's int16 pair broadcast from memory) or 16 madd_epi16 + add (AVX2,
// 8 rows per ymm), then one convert and one multiply-add by d_w[rows] d_x(t, b).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/cpu.h"
#include "kernels/huge_pages.h"
#include "kernels/matmul.h"
#include "kernels/qgemm.h"

namespace kvtrim::kernels {

constexpr int kPackRows = 16;

struct PackedWeights {
  GgmlType type = GgmlType::Q8_0;  // the type of the rows it was built from
  int rows = 0, cols = 0, nb = 0, tiles = 0;
  bool nibbles = false;       // Q4_0: 4-bit codes, two pairs per byte group
  // streamed by every decode step: in huge pages where the kernel has them
  StreamedVector<int8_t> codes;  // [tiles][nb][16][16][2] (nibbles: [tiles][nb][8][16][2] bytes)
  StreamedVector<float> scales;  // [tiles][nb][16]
  size_t bytes() const { return codes.size() + scales.size() * sizeof(float); }
};

// True where PackWeights handles w: Q8_0/Q4_0 with cols a multiple of 32.
bool PackSupports(const WeightView& w);
// The repacked copy of w (PackSupports(w) must hold; empty otherwise), its
// arrays from `arena` where one is given (a model's matrices share it).
PackedWeights PackWeights(const WeightView& w, const std::shared_ptr<StreamedArena>& arena = nullptr);
// Row r's block b from the repacked copy: 32 codes and the scale (tests).
void UnpackBlock(const PackedWeights& p, int r, int b, int8_t* codes, float* d);
// y[t * ldy + r] = row r . token t of a, for r in [r0, r1) and every t; rows
// outside [r0, r1) are not written.
void PackedGemmRows(const PackedWeights& p, const QActs& a, int r0, int r1, float* y, int ldy);
// The path PackedGemmRows runs: the forced one (KVTRIM_KERNELS or
// SetKernelPath), else the fastest measured for this kernel (AVX-512 VNNI
// where the CPU has it; docs/kernels.md).
KernelPath PackedKernelPath();

}  // namespace kvtrim::kernels
