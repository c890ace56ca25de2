// The rotation quantized KV rows are stored in (llama.cpp rotates K and V
// the same way before quantizing them): R = H D / sqrt(b) on each block of
// b entries of a row, with D a fixed pattern of signs over the row and H
// the Walsh-Hadamard matrix of order b, b the largest power of two dividing
// the row length (64 for a head dimension of 64, 32 for 96). R is
// orthogonal, so q.k = (R q).(R k) and sum p_j v_j = R^T sum p_j (R v_j):
// attention over rotated keys and values, with the query rotated and the
// output rotated back, is attention over the originals. An outlier channel
// is spread over its block, so a block's quantization scale follows the
// block's typical entry, not its largest.
#pragma once

namespace kvtrim::kernels {

// The block order b for rows of length d (d > 0).
int HadamardBlock(int d);

// x <- R x for each of `rows` rows of length d (contiguous), and its inverse
// x <- R^T x.
void RotateRows(float* x, int rows, int d);
void UnrotateRows(float* x, int rows, int d);

// The sign of D at entry i (+1 or -1): fixed, as stored contexts depend on it.
float HadamardSign(int i);

}  // namespace kvtrim::kernels
