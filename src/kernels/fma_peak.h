// The machine's multiply-add peak, measured: independent multiply-add chains
// on registers only (no memory traffic), in f32 (FMA), bf16 (the AVX-512
// bf16 dot product, f32 accumulation) and int8 (the AVX-512 VNNI u8 x s8 dot
// product, int32 accumulation). `kvtrim bench --flops` runs them on every
// thread of the pool, so a prefill's rate can be read as a share of the
// peak, as a decode's is of the read bandwidth.
#pragma once
#include <cstdint>

namespace kvtrim::kernels {

enum class PeakKind { kF32 = 0, kBf16 = 1, kInt8 = 2 };

const char* PeakKindName(PeakKind k);
// Whether this CPU has what the kind needs (f32: FMA, 8 lanes with AVX2 or
// 16 with AVX-512; bf16: AVX512-BF16; int8: AVX512-VNNI). Without it the
// kind is not measured (f32 falls back to a scalar loop).
bool HasPeakKind(PeakKind k);
// One thread's loop: `iters` rounds over kAccumulators independent
// accumulators. Every input is 1, so each accumulator lane grows by a known
// amount per round (f32: 1; bf16: 2, a pair of products; int8: 4, four
// products): *check is the sum of every lane after the loop (exact: the
// callers keep it below 2^24), which the tests compare with that count.
// Returns the operations done, a multiply and an add counting two.
double RunPeakLoop(PeakKind k, int64_t iters, double* check);
inline constexpr int kPeakAccumulators = 12;  // > FMA latency x ports (4 x 2 on Zen 4)

}  // namespace kvtrim::kernels
