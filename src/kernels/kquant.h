// Block dequantizers for the ggml types Q4_1, Q5_0, Q5_1 (32 elements) and the
// K-quants Q2_K..Q6_K (256 elements): one block into a float buffer. Used by
// the row table (row_ops.cpp, behind DequantRow, DotRow and AxpyRow: decode
// dots one block at a time from a stack buffer; prefill dequantizes row
// blocks for the GEMM).
#pragma once
#include <cstddef>
#include <cstdint>

#include "io/ggml_types.h"

namespace kvtrim::kernels {

// True for the types handled here.
bool IsBlockType(GgmlType t);
// Writes the block's block_elems values to out.
void DequantBlock(GgmlType t, const uint8_t* blk, float* out);
// *out = dot of nblocks whole blocks with x, straight on the packed codes
// (AVX2+FMA builds); false where that path is not compiled in.
bool DotBlocksAvx2(GgmlType t, const uint8_t* blk, const float* x, int nblocks, float* out);
// The same dot with x in int16 groups of 32 (kernels/qgemm.h QActs): xq
// codes, xd[g] the group scales, xs[2 g], xs[2 g + 1] the sums of the codes of
// the group's two halves (for the types with mins). Integer products per half
// group, float scales. HaveDotBlocksQ16: compiled in (AVX2 builds).
bool HaveDotBlocksQ16();
bool DotBlocksQ16Avx2(GgmlType t, const uint8_t* blk, const int16_t* xq, const float* xd, const int32_t* xs,
                      int nblocks, float* out);
// Rows [r0, r1) of a Q4_K or Q6_K matrix (row_bytes apart, nsb super-blocks of
// 256 per row) times one token's int16 activations (same layout as above):
// y[r] for each row, 4 rows per tile, integer sums per sub-block and the
// scales applied as vectors of 8. False for other types or non-AVX2 builds.
bool GemvKQ16Avx2(GgmlType t, const uint8_t* w, size_t row_bytes, int nsb, const int16_t* xq, const float* xd,
                  const int32_t* xs, int r0, int r1, float* y);

}  // namespace kvtrim::kernels
