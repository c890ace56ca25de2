// The multiply-add peak loops (kernels/fma_peak.h) compute what they claim:
// every lane of every accumulator grows by a known amount a round, so the
// sum after the loop and the operation count are known exactly; and the
// prefill's FLOPs per token (bench --flops) against a count by hand from the
// model's published shape.
#include <gtest/gtest.h>

#include "kernels/fma_peak.h"
#include "kvtrim/bench.h"
#include "test_util.h"

namespace kvtrim {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

using kernels::PeakKind;
constexpr int kAcc = kernels::kPeakAccumulators;

TEST(FmaPeak, F32LoopDoesItsOperations) {
  ASSERT_TRUE(kernels::HasPeakKind(PeakKind::kF32));
  for (int64_t iters : {1, 7, 1000}) {
    double check = -1;
    const double ops = kernels::RunPeakLoop(PeakKind::kF32, iters, &check);
    const double lanes = ops / (2.0 * kAcc * iters);  // 16 (AVX-512), 8 (AVX2) or 1
    EXPECT_TRUE(lanes == 16 || lanes == 8 || lanes == 1) << lanes;
    EXPECT_EQ(check, lanes * kAcc * iters) << "iters " << iters;  // acc = acc * 1 + 1, each round
  }
}

TEST(FmaPeak, Bf16AndInt8LoopsDoTheirOperations) {
  for (PeakKind k : {PeakKind::kBf16, PeakKind::kInt8}) {
    if (!kernels::HasPeakKind(k)) {
      double check = -1;
      EXPECT_EQ(kernels::RunPeakLoop(k, 10, &check), 0) << kernels::PeakKindName(k);  // not measured
      EXPECT_EQ(check, 0);
      continue;
    }
    const double per_lane = k == PeakKind::kBf16 ? 2 : 4;      // products summed into a lane a round
    const double products = k == PeakKind::kBf16 ? 32 : 64;    // per instruction
    for (int64_t iters : {1, 5, 3000}) {
      double check = -1;
      const double ops = kernels::RunPeakLoop(k, iters, &check);
      EXPECT_EQ(ops, 2.0 * products * kAcc * iters) << kernels::PeakKindName(k);
      EXPECT_EQ(check, 16.0 * kAcc * iters * per_lane) << kernels::PeakKindName(k) << " iters " << iters;
    }
  }
}

TEST(FmaPeak, PrefillFlopsPerTokenByHand) {
  // stories260K (MODELS.md): dim 64, 5 layers, 8 heads of 8, 4 KV heads, FFN 172.
  auto e = test::LoadEngine("stories260K.gguf", 1);
  ASSERT_TRUE(e);
  const double weights = 64.0 * 64 + 2 * 64.0 * 32 + 64.0 * 64 + 3 * 64.0 * 172;  // q, k, v, o, FFN
  for (int64_t n : {1, 100, 256}) {
    const double attention = 2.0 * 2.0 * 8 * 8 * (n + 1) / 2.0;  // QK^T and PV, 8 heads of 8
    EXPECT_DOUBLE_EQ(PrefillFlopsPerToken(*e, n), 5 * (2 * weights + attention)) << n;
  }
  const FmaPeak p = MeasureFmaPeak(*e, 1);
  EXPECT_GT(p.f32, 0);  // a rate, not a timing assertion: any positive count over a resolved interval
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim
