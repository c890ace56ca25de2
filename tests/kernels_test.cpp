// Kernels against plain scalar references on awkward shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "test_util.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "kernels/row_ops.h"
#include "kernels/ref/attention_ref.h"
#include "kernels/ref/quant_ref.h"
#include "kv/cache.h"
#include "model/rope.h"

namespace kvtrim::kernels {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

using test::RandVec;

TEST(Quant, HalfConversionsRoundTrip) {
  for (float f : {0.f, 1.f, -2.5f, 65504.f, 6.1035156e-05f, 5.9604645e-08f, 0.333333f}) {
    EXPECT_EQ(F16ToF32(F32ToF16(f)), F16ToF32(F32ToF16(F16ToF32(F32ToF16(f)))));
    EXPECT_NEAR(F16ToF32(F32ToF16(f)), f, std::fabs(f) * 1e-3 + 6e-8);
  }
  EXPECT_EQ(F32ToF16(1.f), 0x3C00);
  EXPECT_EQ(F16ToF32(0xC000), -2.f);
}

class QuantKernels : public ::testing::TestWithParam<std::tuple<GgmlType, int>> {};

TEST_P(QuantKernels, DotDequantAxpyMatchReference) {
  auto [type, n] = GetParam();
  std::mt19937 rng(n * 7 + static_cast<int>(type));
  std::vector<float> w = RandVec(rng, n), x = RandVec(rng, n);
  std::vector<uint8_t> row(RowBytesPadded(type, n));
  QuantizeRow(type, w.data(), row.data(), n);
  std::vector<float> deq(n), deq_ref(n);
  DequantRow(type, row.data(), deq.data(), n);
  ref::DequantRow(type, row.data(), deq_ref.data(), n);
  for (int i = 0; i < n; ++i) ASSERT_EQ(deq[i], deq_ref[i]) << i;
  // Three rows at once (a KV tile), padded rows apart, as the reference row by row.
  const size_t rb = RowBytesPadded(type, n) + 6;
  std::vector<uint8_t> rows(3 * rb);
  for (int r = 0; r < 3; ++r) {
    std::vector<float> wr = RandVec(rng, n);
    QuantizeRow(type, wr.data(), rows.data() + r * rb, n);
  }
  std::vector<float> tile(3 * static_cast<size_t>(n)), one(n);
  DequantRows(type, rows.data(), rb, 3, tile.data(), n);
  for (int r = 0; r < 3; ++r) {
    ref::DequantRow(type, rows.data() + r * rb, one.data(), n);
    for (int i = 0; i < n; ++i) ASSERT_EQ(tile[static_cast<size_t>(r) * n + i], one[i]) << r << " " << i;
  }
  double want = ref::DotRow(type, row.data(), x.data(), n);
  EXPECT_NEAR(DotRow(type, row.data(), x.data(), n), want, 1e-4 * std::sqrt(n) * 4);
  std::vector<float> y(n, 1.f);
  AxpyRow(type, row.data(), 0.5f, y.data(), n);
  for (int i = 0; i < n; ++i) ASSERT_NEAR(y[i], 1.f + 0.5f * deq_ref[i], 1e-6);
  // Round-trip error within the block format's bound. Q8_0: q = round(x/d),
  // d = amax/127 stored as f16 (d16), so |x - q d16| <= d/2 + 127 |d - d16|.
  // Q4_0: d = amax/8 and the top code is clamped, so <= d + 8 |d - d16|.
  // F16: relative 2^-11.
  for (int b = 0; b * 32 < n; ++b) {
    float amax = 0;
    for (int i = b * 32; i < std::min(n, b * 32 + 32); ++i) amax = std::max(amax, std::fabs(w[i]));
    for (int i = b * 32; i < std::min(n, b * 32 + 32); ++i) {
      float err = std::fabs(w[i] - deq[i]);
      float d8 = amax / 127, d4 = amax / 8;
      float d8h = std::fabs(d8 - F16ToF32(F32ToF16(d8))), d4h = std::fabs(d4 - F16ToF32(F32ToF16(d4)));
      if (type == GgmlType::Q8_0) { ASSERT_LE(err, d8 * 0.5f + 127 * d8h + 1e-6f); }
      if (type == GgmlType::Q4_0) { ASSERT_LE(err, d4 + 8 * d4h + 1e-6f); }
      if (type == GgmlType::F16) { ASSERT_LE(err, std::fabs(w[i]) * 0x1p-11f + 1e-7f); }
      if (type == GgmlType::F32) { ASSERT_EQ(err, 0.f); }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, QuantKernels,
                         ::testing::Combine(::testing::Values(GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0,
                                                              GgmlType::BF16),
                                            ::testing::Values(8, 32, 64, 96, 256, 1000)));

// The row table (row_ops.h): the types only read (weights) have no
// quantizer, and QuantizeRow leaves their rows as they were; a type with no
// entry dequantizes to nothing and dots to 0, never reading the row.
TEST(Quant, RowTableWritesOnlyTheStoredTypes) {
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0})
    EXPECT_NE(RowOpsOf(t).quantize, nullptr) << static_cast<int>(t);
  for (GgmlType t : {GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K,
                     GgmlType::Q5_K, GgmlType::Q6_K}) {
    EXPECT_EQ(RowOpsOf(t).quantize, nullptr) << static_cast<int>(t);
    std::vector<uint8_t> row(RowBytesPadded(t, 256), 0xAB);
    std::vector<float> x(256, 1.f);
    QuantizeRow(t, x.data(), row.data(), 256);
    for (uint8_t b : row) ASSERT_EQ(b, 0xAB) << static_cast<int>(t);
  }
  std::vector<float> out(4, 7.f), x(4, 1.f);
  DequantRow(static_cast<GgmlType>(4), nullptr, out.data(), 4);  // 4: a retired ggml type
  for (float v : out) EXPECT_EQ(v, 7.f);
  EXPECT_EQ(DotRow(static_cast<GgmlType>(4), nullptr, x.data(), 4), 0.f);
}

TEST(MatMul, GemmAndGemvAgreeWithScalar) {
  std::mt19937 rng(3);
  ThreadPool pool(2);
  for (GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0}) {
    const int rows = 37, cols = 96, T = 5;
    std::vector<uint8_t> data(RowBytes(type, cols) * rows);
    for (int r = 0; r < rows; ++r) QuantizeRow(type, RandVec(rng, cols).data(), data.data() + RowBytes(type, cols) * r, cols);
    WeightView w{type, data.data(), rows, cols};
    std::vector<float> x = RandVec(rng, T * cols), y(T * rows), y1(rows);
    MatMul(pool, w, x.data(), T, y.data());
    for (int t = 0; t < T; ++t) {
      MatVec(pool, w, &x[t * cols], y1.data());
      for (int r = 0; r < rows; ++r) {
        double want = ref::DotRow(type, w.row(r), &x[t * cols], cols);
        // Q8_0/Q4_0 quantize the activations to int16 blocks (qgemm.h, bounds in
        // qgemm_test.cpp); MatVec keeps float activations.
        const double tol = 1e-3;
        ASSERT_NEAR(y[t * rows + r], want, tol) << TypeName(type);
        ASSERT_NEAR(y1[r], want, 1e-3) << TypeName(type);
      }
    }
  }
}

TEST(Ops, RopeRotatesPairsAndPreservesNorm) {
  std::vector<float> x = {1, 0, 0, 1, 2, 0, 0, 3};
  std::vector<float> y = x;
  Rope(y.data(), 1, 8, 8, 1, 10000.f, RopeMode::kNormal);
  EXPECT_NEAR(y[0], std::cos(1.0), 1e-6);  // pair (0, 1) rotated by theta = 1
  EXPECT_NEAR(y[1], std::sin(1.0), 1e-6);
  std::vector<float> z = x;
  Rope(z.data(), 1, 8, 8, 1, 10000.f, RopeMode::kNeox);
  EXPECT_NEAR(z[0], 1 * std::cos(1.0) - 2 * std::sin(1.0), 1e-6);  // pair (0, 4)
  EXPECT_NEAR(z[4], 1 * std::sin(1.0) + 2 * std::cos(1.0), 1e-6);
  double n0 = 0, n1 = 0, n2 = 0;
  for (int i = 0; i < 8; ++i) n0 += x[i] * x[i], n1 += y[i] * y[i], n2 += z[i] * z[i];
  EXPECT_NEAR(n0, n1, 1e-5);
  EXPECT_NEAR(n0, n2, 1e-5);
}

TEST(Ops, SwiGluMatchesFloat64OnEveryLength) {
  // The 8-wide SLEEF body and the scalar tail against silu(a) * b in double.
  std::mt19937 rng(5);
  for (int n : {1, 7, 8, 9, 37, 768}) {
    std::vector<float> a = RandVec(rng, n), b = RandVec(rng, n);
    for (int i = 0; i < n; ++i) a[i] *= 12.f;  // well into both tails of the sigmoid
    std::vector<float> y = a;
    SwiGlu(y.data(), b.data(), n);
    for (int i = 0; i < n; ++i) {
      const double ref = a[i] / (1.0 + std::exp(-static_cast<double>(a[i]))) * b[i];
      EXPECT_NEAR(y[i], ref, 4e-7 * std::fabs(ref) + 1e-30) << n << " " << i;
    }
  }
}

TEST(Ops, RopeTableRotatesAsTheKernelPerPosition) {
  // model::Rope's per-batch (cos, sin) table, applied to every head, against
  // kernels::Rope evaluated position by position (both layouts, partial rotary).
  for (auto mode : {RopeMode::kNormal, RopeMode::kNeox})
    for (int rot : {8, 16}) {
      model::ModelConfig c;
      c.rope_dims = rot;
      c.rope_mode = mode;
      c.rope_base = 10000.f;
      const model::Rope rope(c, {});
      const int d = 16, heads = 3, pos0 = 37, T = 5;
      std::vector<float> cs;
      rope.Table(pos0, T, &cs);
      ASSERT_EQ(cs.size(), static_cast<size_t>(T) * rope.table_stride());
      std::mt19937 rng(rot);
      for (int t = 0; t < T; ++t) {
        std::vector<float> x = RandVec(rng, heads * d), y = x;
        rope.ApplyTable(x.data(), heads, d, &cs[static_cast<size_t>(t) * rope.table_stride()]);
        Rope(y.data(), heads, d, rot, pos0 + t, 10000.f, mode);
        for (int i = 0; i < heads * d; ++i) EXPECT_NEAR(x[i], y[i], 2e-6) << rot << " " << t << " " << i;
      }
    }
}

// A KV head built from float rows for the attention tests.
struct Head {
  std::vector<std::vector<float>> k, v;
  std::vector<float> b;
  kv::HeadStore store;
  Head(int d, GgmlType t) : store(d, t) {}
  void Add(const std::vector<float>& kk, const std::vector<float>& vv, float logw) {
    store.Append(kk.data(), vv.data(), static_cast<int>(k.size()), logw);
    std::vector<float> kd(kk.size()), vd(vv.size());
    store.ReadKey(store.size() - 1, kd.data());
    store.ReadValue(store.size() - 1, vd.data());
    k.push_back(kd);
    v.push_back(vd);
    b.push_back(logw);
  }
};

class AttentionShapes : public ::testing::TestWithParam<std::tuple<int, int, int, GgmlType>> {};

TEST_P(AttentionShapes, OneAndCausalMatchReference) {
  auto [d, G, n, type] = GetParam();
  std::mt19937 rng(d * 100 + G * 10 + n);
  Head h(d, type);
  for (int j = 0; j < n; ++j) h.Add(RandVec(rng, d), RandVec(rng, d), (j % 3) * 0.25f - 0.2f);
  const float scale = 1.f / std::sqrt(static_cast<float>(d));
  // Decode: G query heads over all n entries.
  std::vector<float> q = RandVec(rng, G * d), out(G * d), scratch(G * n);
  AttendOne(h.store.View(), q.data(), G, scale, out.data(), scratch.data());
  for (int g = 0; g < G; ++g) {
    std::vector<float> qg(q.begin() + g * d, q.begin() + (g + 1) * d);
    auto want = ref::Attend(qg, h.k, h.v, h.b, scale);
    for (int i = 0; i < d; ++i) ASSERT_NEAR(out[g * d + i], want[i], 2e-5) << "g=" << g << " i=" << i;
  }
  // Causal batch: the last T entries are the batch; query t sees [0, n - T + t].
  const int T = std::min(n, 7), n0 = n - T;
  std::vector<float> qs = RandVec(rng, T * G * d), outs(T * G * d);
  AttendCausal(h.store.View(), qs.data(), T, G, G * d, n0, scale, outs.data(), G * d);
  for (int t = 0; t < T; ++t) {
    std::vector<std::vector<float>> k(h.k.begin(), h.k.begin() + n0 + t + 1), v(h.v.begin(), h.v.begin() + n0 + t + 1);
    std::vector<float> b(h.b.begin(), h.b.begin() + n0 + t + 1);
    for (int g = 0; g < G; ++g) {
      std::vector<float> qg(qs.begin() + (t * G + g) * d, qs.begin() + (t * G + g + 1) * d);
      auto want = ref::Attend(qg, k, v, b, scale);
      for (int i = 0; i < d; ++i) ASSERT_NEAR(outs[(t * G + g) * d + i], want[i], 2e-5) << t << "," << g;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Awkward, AttentionShapes,
                         ::testing::Combine(::testing::Values(8, 12, 32), ::testing::Values(1, 2, 4),
                                            ::testing::Values(1, 13, 301), ::testing::Values(GgmlType::F32, GgmlType::Q8_0)));

TEST(Attention, LogWeightLogNEqualsNIdenticalEntries) {
  std::mt19937 rng(11);
  const int d = 32, G = 2;
  std::vector<float> shared_k = RandVec(rng, d), shared_v = RandVec(rng, d);
  for (int copies : {1, 2, 5, 64}) {
    Head many(d, GgmlType::F32), one(d, GgmlType::F32);
    for (int j = 0; j < 9; ++j) {
      auto k = RandVec(rng, d), v = RandVec(rng, d);
      many.Add(k, v, 0.f);
      one.Add(k, v, 0.f);
    }
    for (int c = 0; c < copies; ++c) many.Add(shared_k, shared_v, 0.f);
    one.Add(shared_k, shared_v, std::log(static_cast<float>(copies)));
    std::vector<float> q = RandVec(rng, G * d, 2.f), a(G * d), b(G * d);
    std::vector<float> s1(G * many.store.size()), s2(G * one.store.size());
    AttendOne(many.store.View(), q.data(), G, 0.2f, a.data(), s1.data());
    AttendOne(one.store.View(), q.data(), G, 0.2f, b.data(), s2.data());
    // Equal up to float32 summation rounding over the copies (stated: 4e-6).
    for (int i = 0; i < G * d; ++i) EXPECT_NEAR(a[i], b[i], 4e-6) << copies;
    // The merged entry carries exactly the mass of the copies.
    for (int g = 0; g < G; ++g) {
      double mass = 0;
      for (int c = 0; c < copies; ++c) mass += s1[g * many.store.size() + 9 + c];
      EXPECT_NEAR(mass, s2[g * one.store.size() + 9], 1e-6);
    }
  }
}

TEST(Attention, HeadsOfDifferentLengths) {
  // One cache, heads of lengths 3, 17, 1 and 40 in one layer: each head's
  // output depends on its own entries only.
  std::mt19937 rng(5);
  const int d = 8;
  kv::KvCache cache(1, 4, d);
  const int lens[4] = {3, 17, 1, 40};
  for (int h = 0; h < 4; ++h)
    for (int j = 0; j < lens[h]; ++j) {
      auto k = RandVec(rng, d), v = RandVec(rng, d);
      cache.head(0, h).Append(k.data(), v.data(), j, 0.f);
    }
  for (int h = 0; h < 4; ++h) {
    const kv::HeadStore& hs = cache.head(0, h);
    ASSERT_EQ(hs.size(), lens[h]);
    std::vector<std::vector<float>> k(hs.size(), std::vector<float>(d)), v = k;
    std::vector<float> b(hs.size(), 0.f);
    for (int j = 0; j < hs.size(); ++j) hs.ReadKey(j, k[j].data()), hs.ReadValue(j, v[j].data());
    std::vector<float> q = RandVec(rng, d), out(d), scratch(hs.size());
    AttendOne(hs.View(), q.data(), 1, 0.35f, out.data(), scratch.data());
    auto want = ref::Attend(q, k, v, b, 0.35f);
    for (int i = 0; i < d; ++i) EXPECT_NEAR(out[i], want[i], 1e-5);
  }
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::kernels
