// The AVX-512 decode chunk kernel (attention_decode_avx512.cpp), chosen at
// run time by AttendChunk in builds for an AVX-512 CPU (and when
// KVTRIM_KERNELS does not ask for less).
#pragma once

#include "kernels/attention.h"

namespace kvtrim::kernels {

// True where the build has the kernel (it targets AVX-512 BW and F16C, as
// -march=native does on such a CPU) and KVTRIM_KERNELS
// (or SetKernelPath) has not asked for a lower path.
bool DecodeAvx512Active();
// True where DecodeChunkAvx512 multiplies keys of this type and head size
// in int8 by the query quantized per block of 32 (scale amax / 127, codes
// rounded to nearest, the scale kept in f32): q8_0 and q4_0 with d 64, 128
// or 256 on an AVX512-VNNI build. The scores are then those of that query,
// and P.V multiplies the values' codes by the weights (times the values'
// block scales) quantized to int16 per tile of entries, each off by at
// most half of the tile's largest / 32767.
bool DecodeQueryInt8(GgmlType type, int d);
// One decode step over every entry of kv, as AttendChunk documents it (out
// [G, d] normalized over kv, ml [G * 2] the score maxima and softmax sums).
// False (nothing written) for what it does not handle: a type other than
// F32, F16, Q8_0 or Q4_0, d other than 32, 64, 96, 128 or 256, G above 16,
// or f32 tail rows.
bool DecodeChunkAvx512(const KvView& kv, const float* q, int G, float scale, float* out, float* ml);
// Whether the kernel asks for the keys and values of the next 16 entries
// while it computes the current 16 (software prefetch into L1): on unless
// the environment has KVTRIM_DECODE_PREFETCH=0 (read once). Set switches
// it (benchmarks, tests) and returns the previous setting.
bool DecodePrefetch();
bool SetDecodePrefetch(bool on);

}  // namespace kvtrim::kernels
