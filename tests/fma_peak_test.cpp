// The multiply-add peak loops (kernels/fma_peak.h) compute what they claim:
// every lane of every accumulator grows by a known amount a round, so the
// sum after the loop and the operation count are known exactly; and the
// prefill's FLOPs per token (bench --flops) and a decode step's weight bytes
// against counts by hand from the model's published shape.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>

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

// The weight bytes a decode step reads, as bench rows count them, against
// a count by hand (MODELS.md: needle-3.7M, dim 256, 4 layers, 8 heads and 4
// KV heads of 32, FFN 768, vocab 2048, tied embeddings): Q8_0 matrices are
// read from their repack, 32 one-byte codes and a 4-byte f32 scale per 32
// values (no row padding: every row count here is a multiple of 16); the
// f32 file is read as stored; norms in f32 either way.
TEST(FmaPeak, DecodeWeightBytesAreTheProductsReads) {
  const double values = 4 * (2 * 256.0 * 256 + 2 * 128.0 * 256 + 3 * 768.0 * 256) + 2048.0 * 256;
  const double norms = (4 * 2 * 256.0 + 256) * 4;
  for (const char* model : {"needle-3.7M-q8_0.gguf", "needle-3.7M-f32.gguf"}) {
    auto e = test::LoadEngine(model, 1);
    ASSERT_TRUE(e);
    const bool q8 = std::string(model).find("q8_0") != std::string::npos;
    if (q8 && std::getenv("KVTRIM_REPACK")) GTEST_SKIP() << "KVTRIM_REPACK set: no repack to count";
    BenchOptions o = test::SmallBench({0}, 2, 1, 4);
    auto rows = RunBench(*e, o);
    ASSERT_TRUE(rows.ok()) << rows.error().message;
    EXPECT_DOUBLE_EQ(rows.value()[0].weight_bytes_per_tok, values * (q8 ? 36.0 / 32 : 4.0) + norms) << model;
  }
}

// --membw's rows: each row is read against the probes beside its own timed
// decode steps (one just before and one just after each repetition's), and
// its share is its bytes a second over their mean; without the option no
// probe runs and the share is 0.
TEST(FmaPeak, BenchRowsReadAgainstTheProbesBesideThem) {
  auto e = test::LoadEngine("stories260K.gguf", 1);
  ASSERT_TRUE(e);
  BenchOptions o = test::SmallBench({0, 32}, 4, 2, 8);
  auto off = RunBench(*e, o);
  ASSERT_TRUE(off.ok()) << off.error().message;
  for (const BenchRow& r : off.value()) {
    EXPECT_EQ(r.mem_read_gb_s.mean, 0.0);
    EXPECT_EQ(r.bw_share, 0.0);
  }
  o.membw_bytes = size_t{8} << 20;
  auto on = RunBench(*e, o);
  ASSERT_TRUE(on.ok()) << on.error().message;
  for (const BenchRow& r : on.value()) {
    EXPECT_GT(r.mem_read_gb_s.mean, 0.0) << r.depth;
    EXPECT_TRUE(std::isfinite(r.mem_read_gb_s.sd)) << r.depth;
    EXPECT_GT(r.gb_s, 0.0);
    EXPECT_DOUBLE_EQ(r.bw_share, r.gb_s / r.mem_read_gb_s.mean) << r.depth;
  }
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim
