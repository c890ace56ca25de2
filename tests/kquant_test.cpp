// Q4_1, Q5_0, Q5_1 and the K-quants (Q2_K..Q6_K): the block kernels against the
// element-at-a-time reference, hand-built blocks against closed forms, and the
// needle model in each llama.cpp-quantized file against float64 goldens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <string>

#include "io/gguf.h"
#include "kernels/cpu.h"
#include "kernels/kquant.h"
#include "kernels/matmul.h"
#include "kernels/qgemm.h"
#include "kernels/quant.h"
#include "kernels/ref/quant_ref.h"
#include "test_util.h"

namespace kvtrim {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

using kernels::F32ToF16;

void PutHalf(uint8_t* p, float f) {
  uint16_t h = F32ToF16(f);
  std::memcpy(p, &h, 2);
}

// Byte offsets of the f16 fields (d, and dmin/m where the type has one).
std::vector<int> HalfOffsets(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_1: case GgmlType::Q5_1: case GgmlType::Q4_K: case GgmlType::Q5_K: return {0, 2};
    case GgmlType::Q5_0: return {0};
    case GgmlType::Q2_K: return {80, 82};
    case GgmlType::Q3_K: return {108};
    case GgmlType::Q6_K: return {208};
    default: return {};
  }
}

// Random bytes with finite, moderate f16 scales.
std::vector<uint8_t> RandomRow(std::mt19937& rng, GgmlType t, int n) {
  const TypeTraits* tt = GetTypeTraits(static_cast<uint32_t>(t));
  std::vector<uint8_t> row(n / tt->block_elems * tt->block_bytes);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  for (uint8_t& b : row) b = static_cast<uint8_t>(byte(rng));
  for (size_t b = 0; b < row.size(); b += tt->block_bytes)
    for (int off : HalfOffsets(t)) PutHalf(&row[b + off], scale(rng));
  return row;
}

class BlockTypes : public ::testing::TestWithParam<GgmlType> {};

TEST_P(BlockTypes, KernelsMatchElementwiseReference) {
  const GgmlType t = GetParam();
  std::mt19937 rng(static_cast<unsigned>(t) * 7 + 1);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int n : {256, 512, 1024 + 256}) {
    std::vector<uint8_t> row = RandomRow(rng, t, n);
    std::vector<float> x(n), fast(n), ref(n);
    for (float& v : x) v = nd(rng);
    kernels::DequantRow(t, row.data(), fast.data(), n);
    kernels::ref::DequantRow(t, row.data(), ref.data(), n);
    double mass = 0;
    for (int i = 0; i < n; ++i) {
      ASSERT_NEAR(fast[i], ref[i], 1e-6 * (1 + std::fabs(ref[i]))) << TypeName(t) << " n=" << n << " i=" << i;
      mass += std::fabs(double{ref[i]} * x[i]);
    }
    ASSERT_GT(mass, 0.0);
    const double want = kernels::ref::DotRow(t, row.data(), x.data(), n);
    EXPECT_NEAR(kernels::DotRow(t, row.data(), x.data(), n), want, 1e-5 * mass) << TypeName(t) << " n=" << n;
    std::vector<float> y(x);
    kernels::AxpyRow(t, row.data(), 0.5f, y.data(), n);
    for (int i = 0; i < n; ++i) ASSERT_NEAR(y[i], x[i] + 0.5 * ref[i], 1e-5 * (1 + std::fabs(ref[i])));
  }
}

// Prefill (dequantized row blocks through Eigen's GEMM) and decode (block dots) agree with float64.
TEST_P(BlockTypes, MatMulAndMatVecMatchReference) {
  const GgmlType t = GetParam();
  std::mt19937 rng(static_cast<unsigned>(t) * 13 + 5);
  std::normal_distribution<float> nd(0.f, 1.f);
  const int rows = 37, cols = 512, T = 5;
  std::vector<uint8_t> w;
  for (int r = 0; r < rows; ++r) {
    auto row = RandomRow(rng, t, cols);
    w.insert(w.end(), row.begin(), row.end());
  }
  kernels::WeightView view{t, w.data(), rows, cols};
  std::vector<float> x(T * cols), y(T * rows), y1(rows);
  for (float& v : x) v = nd(rng);
  kernels::ThreadPool pool(2);
  kernels::MatMul(pool, view, x.data(), T, y.data());
  kernels::MatMul(pool, view, x.data() + (T - 1) * cols, 1, y1.data());
  std::vector<float> wr(cols);
  for (int r = 0; r < rows; ++r) {
    kernels::ref::DequantRow(t, view.row(r), wr.data(), cols);
    double mass = 0;
    for (int c = 0; c < cols; ++c) mass += std::fabs(double{wr[c]} * x[(T - 1) * cols + c]);
    for (int s = 0; s < T; ++s) {
      double want = kernels::ref::DotRow(t, view.row(r), x.data() + s * cols, cols);
      ASSERT_NEAR(y[s * rows + r], want, 1e-4 * (1 + mass)) << TypeName(t) << " r=" << r << " t=" << s;
    }
    // Decode quantizes x to int16 groups of 32 (qgemm.h) where the integer block dots
    // exist: within the rounding bound sum_c |w_c| d_x(group) / 2 of the float dot.
    double bound = 1e-4 * (1 + mass);
    if (kernels::QGemvBlockSupports(view)) {
      for (int g = 0; g < cols / 32; ++g) {
        float amax = 0, wsum = 0;
        for (int c = 32 * g; c < 32 * g + 32; ++c) {
          amax = std::max(amax, std::fabs(x[(T - 1) * cols + c]));
          wsum += std::fabs(wr[c]);
        }
        bound += wsum * amax / 32767.0 / 2;
      }
    }
    ASSERT_NEAR(y1[r], y[(T - 1) * rows + r], bound) << TypeName(t) << " r=" << r;
  }
}

// The integer decode dot (DotBlocksQ16Avx2) against float64 of the same scheme:
// sum_i w_i q_x(i) d_x(group of i), w from the element-wise reference.
TEST_P(BlockTypes, Q8DotMatchesReferenceOfSameScheme) {
  const GgmlType t = GetParam();
  if (!kernels::HaveDotBlocksQ16()) GTEST_SKIP() << "no AVX2 build";
  std::mt19937 rng(static_cast<unsigned>(t) * 17 + 3);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int n : {256, 768}) {
    std::vector<uint8_t> row = RandomRow(rng, t, n);
    std::vector<float> x(n), wr(n);
    for (float& v : x) v = nd(rng);
    kernels::QActs a;
    kernels::QuantizeActs(x.data(), 1, n, &a);
    kernels::ref::DequantRow(t, row.data(), wr.data(), n);
    double want = 0, mass = 0;
    for (int i = 0; i < n; ++i) {
      const double xi = double{a.d[i / 32]} * a.q[i];
      want += double{wr[i]} * xi;
      mass += std::fabs(double{wr[i]} * xi);
    }
    const int nblocks = n / static_cast<int>(GetTypeTraits(static_cast<uint32_t>(t))->block_elems);
    float got = 0;
    ASSERT_TRUE(kernels::DotBlocksQ16Avx2(t, row.data(), a.q.data(), a.d.data(), a.hsum.data(), nblocks, &got));
    EXPECT_NEAR(got, want, 1e-5 * (1 + mass)) << TypeName(t) << " n=" << n;
  }
}

// Decode through QGemvBlockRows (Q4_K/Q6_K: the 4-row tiles of GemvKQ16Avx2;
// the others: one row at a time) on every dispatch path, on a row range that
// does not fill the tiles, against float64 of the same scheme; nothing outside
// the range written. The scalar path (no integer block dots) goes through
// MatMul's float dot and is held to the activation rounding bound instead.
TEST_P(BlockTypes, RowTilesMatchReferenceOnEveryPath) {
  const GgmlType t = GetParam();
  std::mt19937 rng(static_cast<unsigned>(t) * 29 + 11);
  std::normal_distribution<float> nd(0.f, 1.f);
  kernels::ThreadPool pool(1);
  for (kernels::KernelPath path : {kernels::KernelPath::kScalar, kernels::KernelPath::kAvx2, kernels::KernelPath::kAvx512}) {
    if (path > kernels::BestKernelPath()) continue;
    const kernels::KernelPath old = kernels::SetKernelPath(path);
    for (int cols : {256, 768}) {
      const int rows = 11;
      std::vector<uint8_t> w;
      for (int r = 0; r < rows; ++r) {
        auto row = RandomRow(rng, t, cols);
        w.insert(w.end(), row.begin(), row.end());
      }
      kernels::WeightView view{t, w.data(), rows, cols};
      std::vector<float> x(cols), wr(cols), y(rows, -7.f), y1(rows);
      for (float& v : x) v = nd(rng);
      kernels::QActs a;
      kernels::QuantizeActs(x.data(), 1, cols, &a);
      const bool integer = kernels::QGemvBlockSupports(view);
      EXPECT_EQ(integer, path != kernels::KernelPath::kScalar && kernels::HaveDotBlocksQ16());
      if (integer) kernels::QGemvBlockRows(view, a, 1, rows - 1, y.data());
      kernels::MatMul(pool, view, x.data(), 1, y1.data());
      for (int r = 0; r < rows; ++r) {
        kernels::ref::DequantRow(t, view.row(r), wr.data(), cols);
        double want = 0, mass = 0, bound = 0;
        for (int i = 0; i < cols; ++i) {
          const double xi = double{a.d[i / 32]} * a.q[i];
          want += double{wr[i]} * xi;
          mass += std::fabs(double{wr[i]} * xi);
          bound += std::fabs(double{wr[i]}) * a.d[i / 32] / 2;
        }
        const std::string where = std::string(TypeName(t)) + " " + kernels::KernelPathName(path) +
                                  " cols=" + std::to_string(cols) + " r=" + std::to_string(r);
        ASSERT_NEAR(y1[r], want, (integer ? 0.0 : bound) + 1e-5 * (1 + mass)) << where;
        if (!integer) continue;
        if (r == 0 || r == rows - 1) ASSERT_EQ(y[r], -7.f) << where;
        else ASSERT_NEAR(y[r], want, 1e-5 * (1 + mass)) << where;
      }
    }
    kernels::SetKernelPath(old);
  }
}

INSTANTIATE_TEST_SUITE_P(Ggml, BlockTypes,
                         ::testing::Values(GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q2_K,
                                           GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K),
                         [](const auto& info) { return TypeName(info.param); });

// Hand-built blocks with every code at a known value, checked against closed forms.
TEST(BlockTypesClosedForm, Q5_0AndQ5_1FifthBit) {
  uint8_t b0[22] = {}, b1[24] = {};
  PutHalf(b0, 0.5f);
  PutHalf(b1, 0.25f);
  PutHalf(b1 + 2, -1.f);
  const uint32_t qh = 0x80000001u;  // fifth bit of elements 0 and 31
  std::memcpy(b0 + 2, &qh, 4);
  std::memcpy(b1 + 4, &qh, 4);
  for (int j = 0; j < 16; ++j) b0[6 + j] = b1[8 + j] = static_cast<uint8_t>((15 - j) << 4 | j);
  float y0[32], y1[32];
  kernels::DequantRow(GgmlType::Q5_0, b0, y0, 32);
  kernels::DequantRow(GgmlType::Q5_1, b1, y1, 32);
  for (int i = 0; i < 32; ++i) {
    int q = (i < 16 ? i : 31 - i) + ((i == 0 || i == 31) ? 16 : 0);
    EXPECT_EQ(y0[i], 0.5f * (q - 16)) << i;
    EXPECT_EQ(y1[i], 0.25f * q - 1.f) << i;
  }
}

TEST(BlockTypesClosedForm, Q4_KSixBitScalesAndMins) {
  uint8_t b[144] = {};
  PutHalf(b, 0.5f);
  PutHalf(b + 2, 0.25f);
  int sc[8], mn[8];
  for (int j = 0; j < 8; ++j) {  // values >= 16 exercise the split high bits of sub-blocks 4..7
    sc[j] = 1 + 8 * j;
    mn[j] = 63 - 8 * j;
    uint8_t* s = b + 4;
    if (j < 4) { s[j] = static_cast<uint8_t>(sc[j]); s[j + 4] = static_cast<uint8_t>(mn[j]); }
    else {
      s[j + 4] = static_cast<uint8_t>((sc[j] & 0xF) | ((mn[j] & 0xF) << 4));
      s[j - 4] |= static_cast<uint8_t>((sc[j] >> 4) << 6);
      s[j] |= static_cast<uint8_t>((mn[j] >> 4) << 6);
    }
  }
  for (int k = 0; k < 128; ++k) b[16 + k] = static_cast<uint8_t>((k % 16) | ((15 - k % 16) << 4));
  float y[256];
  kernels::DequantRow(GgmlType::Q4_K, b, y, 256);
  for (int i = 0; i < 256; ++i) {
    int l = i % 32, q = (i / 32) % 2 == 0 ? l % 16 : 15 - l % 16;
    EXPECT_FLOAT_EQ(y[i], 0.5f * sc[i / 32] * q - 0.25f * mn[i / 32]) << i;
  }
}

TEST(BlockTypesClosedForm, Q6_KSignedScalesAndSplitBits) {
  uint8_t b[210] = {};
  PutHalf(b + 208, 0.125f);
  for (int k = 0; k < 16; ++k) b[192 + k] = static_cast<uint8_t>(static_cast<int8_t>(k - 8));
  // All codes 63 (value 31): every ql nibble and qh 2-bit field set.
  std::memset(b, 0xFF, 192);
  float y[256];
  kernels::DequantRow(GgmlType::Q6_K, b, y, 256);
  for (int i = 0; i < 256; ++i) EXPECT_FLOAT_EQ(y[i], 0.125f * (i / 16 - 8) * 31) << i;
  // Only element 200's code: half 1, quarter 2 (high nibble of ql[64+8], qh[128+32+8] bits 4-5).
  std::memset(b, 0, 192);
  b[64 + 8] = 0x50;
  b[128 + 32 + 8] = 0x20;
  kernels::DequantRow(GgmlType::Q6_K, b, y, 256);
  for (int i = 0; i < 256; ++i)
    EXPECT_FLOAT_EQ(y[i], 0.125f * (i / 16 - 8) * ((i == 200 ? 5 + 32 : 0) - 32)) << i;
}

TEST(BlockTypesClosedForm, Q2_KAndQ3_K) {
  uint8_t b2[84] = {};
  PutHalf(b2 + 80, 0.5f);
  PutHalf(b2 + 82, 0.25f);
  for (int k = 0; k < 16; ++k) b2[k] = static_cast<uint8_t>((k % 16) | ((15 - k) << 4));
  for (int k = 0; k < 64; ++k) b2[16 + k] = 0xE4;  // 2-bit fields 0,1,2,3 from low to high
  float y[256];
  kernels::DequantRow(GgmlType::Q2_K, b2, y, 256);
  for (int i = 0; i < 256; ++i) {
    int k = i / 16, q = (i % 128) / 32;
    EXPECT_FLOAT_EQ(y[i], 0.5f * k * q - 0.25f * (15 - k)) << i;
  }
  uint8_t b3[110] = {};
  PutHalf(b3 + 108, 0.5f);
  for (int k = 0; k < 64; ++k) b3[32 + k] = 0xE4;
  for (int l = 0; l < 32; ++l) b3[l] = static_cast<uint8_t>(l % 2 ? 0xFF : 0x00);  // odd l: high bit set
  // Scale k = 6-bit code 32 + k - 8 (value k - 8): low 4 bits in bytes 0..7, high 2 bits in bytes 8..11.
  for (int k = 0; k < 16; ++k) {
    int code = 24 + k;
    b3[96 + (k % 8)] |= static_cast<uint8_t>((code & 0xF) << (k < 8 ? 0 : 4));
    b3[96 + 8 + k % 4] |= static_cast<uint8_t>((code >> 4) << (2 * (k / 4)));
  }
  kernels::DequantRow(GgmlType::Q3_K, b3, y, 256);
  for (int i = 0; i < 256; ++i) {
    int k = i / 16, q = (i % 128) / 32 - (i % 2 ? 0 : 4);
    EXPECT_FLOAT_EQ(y[i], 0.5f * (k - 8) * q) << i;
  }
}

// The needle v0 model quantized by llama.cpp into each type (with its _M/_S mixes):
// top-10 logits within 5e-2 of the float64 reference (MODELS.md), prefill and decode.
TEST(QuantTypesGolden, EveryFileMatchesTopLogits) {
  const auto g = nlohmann::json::parse(test::ReadFile(test::ModelPath("goldens-quant-types.json")));
  ASSERT_GE(g.size(), 8u);
  for (const auto& e : g) {
    const std::string model = e["model"];
    auto f = io::GgufFile::Open(test::ModelPath(model));
    ASSERT_TRUE(f.ok()) << model << ": " << f.error().message;
    std::set<std::string> types;
    for (const auto& t : f.value()->tensors()) types.insert(TypeName(t.type));
    EXPECT_EQ(types, e["tensor_types"].get<std::set<std::string>>()) << model;
    auto eng = test::LoadEngine(model);
    ASSERT_TRUE(eng) << model;
    std::vector<int> ids = e["ids"].get<std::vector<int>>();
    std::vector<int> top = e["top_ids"].get<std::vector<int>>();
    std::vector<double> want = e["top_logits"].get<std::vector<double>>();
    // Prefill all but the last token, then decode it, and prefill the whole prompt at once.
    for (bool decode_last : {false, true}) {
      auto s = Session::Create(*eng, SessionOptions{});
      ASSERT_TRUE(s.ok());
      if (decode_last) {
        ASSERT_TRUE(s.value()->Prefill({ids.begin(), ids.end() - 1}).ok());
        ASSERT_TRUE(s.value()->Decode(ids.back()).ok());
      } else {
        ASSERT_TRUE(s.value()->Prefill(ids).ok());
      }
      const std::vector<float>& lg = s.value()->logits();
      double max_diff = 0;
      for (size_t i = 0; i < top.size(); ++i) max_diff = std::max(max_diff, std::fabs(lg[top[i]] - want[i]));
      EXPECT_LE(max_diff, 5e-2) << model << (decode_last ? " (decode)" : " (prefill)");
      std::printf("[ quant-golden ] %-26s %s max|diff| %.2e\n", model.c_str(), decode_last ? "decode " : "prefill",
                  max_diff);
      EXPECT_EQ(std::max_element(lg.begin(), lg.end()) - lg.begin(), top[0]) << model;
    }
  }
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim
