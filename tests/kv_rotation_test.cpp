// Rotated KV (kernels/hadamard.h, --kv-rotate): the rotation is the
// definition's orthogonal matrix (Sylvester's Hadamard entries by popcount,
// not the butterfly); attention over a rotated cache equals attention over
// the unrotated one to rounding, in prefill and decode, in f32 and in the
// quantized decode path; q4_0 stores a row with an outlier channel closer
// rotated; a rotated context saved and loaded answers the same, a file
// without the rotation field (written before it existed) loads unrotated,
// and an unknown rotation is refused by name.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>

#include "context_round_trip.h"
#include "engine/engine_impl.h"
#include "io/context_file.h"
#include "kernels/cpu.h"
#include "kernels/hadamard.h"
#include "kv/cache.h"
#include "kvtrim/engine.h"
#include "kvtrim/eval_report.h"
#include "test_util.h"

namespace kvtrim {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

// R [d, d] in float64 from the definition: block-diagonal Sylvester
// Hadamard blocks of order b, H_ij = (-1)^popcount(i & j), times the signs
// D, over sqrt(b).
std::vector<double> RotationMatrix(int d) {
  const int b = kernels::HadamardBlock(d);
  std::vector<double> R(static_cast<size_t>(d) * d, 0.0);
  for (int o = 0; o < d; o += b)
    for (int i = 0; i < b; ++i)
      for (int j = 0; j < b; ++j)
        R[static_cast<size_t>(o + i) * d + o + j] =
            (std::popcount(static_cast<unsigned>(i & j)) % 2 ? -1.0 : 1.0) * kernels::HadamardSign(o + j) / std::sqrt(b);
  return R;
}

// The first 32 signs of D, from splitmix64 of the index (computed apart, in Python).
constexpr const char* kSignsV1 = "---+++-+--++--+-+-+-++----------";

std::vector<float> Gaussian(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g;
  std::vector<float> x(n);
  for (float& y : x) y = g(rng);
  return x;
}

// Runs the enclosed code on one kernel path, the previous one restored after.
struct PathGuard {
  explicit PathGuard(kernels::KernelPath p) : old(kernels::SetKernelPath(p)) {}
  ~PathGuard() { kernels::SetKernelPath(old); }
  kernels::KernelPath old;
};

TEST(KvRotation, RotationIsTheDefinitionsOrthogonalMatrix) {
  EXPECT_EQ(kernels::HadamardBlock(64), 64);
  EXPECT_EQ(kernels::HadamardBlock(96), 32);
  EXPECT_EQ(kernels::HadamardBlock(80), 16);
  EXPECT_EQ(kernels::HadamardBlock(8), 8);
  // Every path this CPU has: the scalar butterfly and the AVX-512 one.
  for (kernels::KernelPath path : {kernels::KernelPath::kScalar, kernels::BestKernelPath()})
  for (int d : {8, 32, 64, 96, 128}) {
    const PathGuard guard(path);
    const std::vector<double> R = RotationMatrix(d);
    const int rows = 3;
    std::vector<float> x = Gaussian(rows * d, 7 + d), y = x;
    kernels::RotateRows(y.data(), rows, d);
    for (int r = 0; r < rows; ++r) {
      double n0 = 0, n1 = 0;
      for (int i = 0; i < d; ++i) {
        double want = 0;
        for (int j = 0; j < d; ++j) want += R[static_cast<size_t>(i) * d + j] * x[r * d + j];
        ASSERT_NEAR(y[r * d + i], want, 1e-5) << kernels::KernelPathName(path) << " d " << d << " row " << r << " entry " << i;
        n0 += static_cast<double>(x[r * d + i]) * x[r * d + i];
        n1 += static_cast<double>(y[r * d + i]) * y[r * d + i];
      }
      EXPECT_NEAR(n1, n0, 1e-5 * n0) << d;  // orthogonal: the norm stays
    }
    kernels::UnrotateRows(y.data(), rows, d);
    for (int i = 0; i < rows * d; ++i) ASSERT_NEAR(y[i], x[i], 1e-5) << "d " << d << " entry " << i;
  }
}

TEST(KvRotation, TheSignPatternIsPinned) {
  // Stored contexts depend on it ("hadamard-signs-v1"): changing it needs a
  // new name in the header.
  std::string s;
  for (int i = 0; i < 32; ++i) s += kernels::HadamardSign(i) > 0 ? '+' : '-';
  EXPECT_EQ(s, kSignsV1);
}

TEST(KvRotation, Q4StoresARowWithAnOutlierChannelCloserRotated) {
  // A key with one channel 30 standard deviations out sets its q4_0 block's
  // scale: the other 31 entries of the block round to a step of 30/7.
  // Rotated, the outlier is spread over the 64 entries and every block's
  // step follows its typical entry.
  const int d = 64;
  double err[2] = {0, 0};
  for (int rot = 0; rot < 2; ++rot) {
    kv::HeadStore s(d, GgmlType::Q4_0, rot == 1);
    for (uint32_t seed = 0; seed < 16; ++seed) {
      std::vector<float> k = Gaussian(d, 100 + seed);
      k[5] = 30.f;
      s.Append(k.data(), k.data(), static_cast<int32_t>(seed), 0.f);
      std::vector<float> back(d);
      s.ReadKey(static_cast<int>(seed), back.data());
      for (int i = 0; i < d; ++i) err[rot] += (back[i] - k[i]) * (back[i] - k[i]);
    }
  }
  std::printf("q4_0 squared error of 16 outlier rows: unrotated %.2f, rotated %.2f\n", err[0], err[1]);
  EXPECT_LT(err[1], 0.5 * err[0]);
}

TEST(KvRotation, TheEvalReportSaysWhenEntriesAreRotated) {
  EXPECT_NE(eval::KvStorage("q4_0", "kept", "auto").find("rotated"), std::string::npos);
  EXPECT_NE(eval::KvStorage("f16", "write", "on").find("rotated"), std::string::npos);
  EXPECT_EQ(eval::KvStorage("q4_0", "kept", "off").find("rotated"), std::string::npos);
  EXPECT_EQ(eval::KvStorage("f16", "write", "auto").find("rotated"), std::string::npos);
  EXPECT_EQ(eval::KvStorage("f32", "kept", "auto").rfind("f32 (the reference", 0), 0u);
}

std::unique_ptr<Session> Prefilled(const Engine& e, const std::string& quant, const std::string& rotate,
                                   const std::vector<int>& toks, int ubatch = 32) {
  SessionOptions so;
  so.ubatch = ubatch;
  so.kv.quant = quant;
  so.kv.rotate = rotate;
  auto s = Session::Create(e, so);
  EXPECT_TRUE(s.ok()) << s.error().message;
  EXPECT_TRUE(s.value()->Prefill(toks).ok());
  return std::move(s.value());
}

float MaxRelDiff(const std::vector<float>& a, const std::vector<float>& b) {
  float md = 0.f, mx = 0.f;
  for (size_t i = 0; i < a.size(); ++i) md = std::max(md, std::fabs(a[i] - b[i])), mx = std::max(mx, std::fabs(b[i]));
  return md / mx;
}

TEST(KvRotation, RotatedCacheAttendsAsTheUnrotatedToRounding) {
  // The default model (head dim 32); a prefill in batches of 32 (later
  // batches read stored rows) and decode steps.
  auto e = test::LoadEngine("needle-v1-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  const std::vector<int> toks = e->impl().tokenizer().Encode(test::ReadFile(test::ModelPath("stories260K.golden-prompt.txt")), true);
  ASSERT_GT(toks.size(), 40u);
  for (const char* quant : {"f32", "q8_0"}) {
    auto on = Prefilled(*e, quant, "on", toks), off = Prefilled(*e, quant, "off", toks);
    ASSERT_TRUE(on->impl().cache().rotated());
    ASSERT_FALSE(off->impl().cache().rotated());
    const float prefill = MaxRelDiff(on->logits(), off->logits());
    float decode = 0.f;
    for (int id : {5, 17, 42, 99}) {  // f32: the reference decode kernel; q8_0: the split decode
      ASSERT_TRUE(on->Decode(id).ok());
      ASSERT_TRUE(off->Decode(id).ok());
      decode = std::max(decode, MaxRelDiff(on->logits(), off->logits()));
    }
    std::printf("%s rotated vs not: max |logit diff| / max |logit| prefill %.2e, decode %.2e\n", quant, prefill, decode);
    if (std::string(quant) == "f32") {  // the rotation's float rounding only
      EXPECT_LT(prefill, 1e-5f);
      EXPECT_LT(decode, 1e-5f);
    } else {  // two q8_0 roundings of different vectors
      EXPECT_LT(prefill, 2e-2f);
      EXPECT_LT(decode, 2e-2f);
    }
  }
}

TEST(KvRotation, ASavedRotatedContextAnswersTheSameAndOldFilesLoadUnrotated) {
  auto e = test::LoadEngine("needle-v1-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  const std::vector<int> toks = e->impl().tokenizer().Encode(test::ReadFile(test::ModelPath("stories260K.golden-prompt.txt")), true);
  for (const char* rotate : {"auto", "off"}) {
    SessionOptions so;
    so.kv.policy = "snapkv";
    so.kv.ratio = 0.5;
    so.kv.quant = "q4_0";
    so.kv.rotate = rotate;
    auto a = Session::Create(*e, so);
    ASSERT_TRUE(a.ok()) << a.error().message;
    ASSERT_TRUE(a.value()->Prefill(toks).ok());
    ASSERT_TRUE(a.value()->Compress().ok());
    ASSERT_EQ(a.value()->impl().cache().rotated(), std::string(rotate) == "auto");
    std::string bytes = a.value()->ContextBytes();
    auto img = io::ParseContextBytes(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    ASSERT_TRUE(img.ok()) << img.error().message;
    EXPECT_EQ(img->meta.at("kv_rotation"), std::string(rotate) == "auto" ? "hadamard-signs-v1" : "none");
    if (std::string(rotate) == "off") {  // as written before the field existed
      img->meta.erase("kv_rotation");
      bytes = io::SerializeContext(img.value());
    }
    auto b = Session::LoadContextBytes(*e, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "ctx", {});
    ASSERT_TRUE(b.ok()) << b.error().message;
    EXPECT_EQ(b.value()->impl().cache().rotated(), a.value()->impl().cache().rotated()) << rotate;
    EXPECT_EQ(b.value()->logits(), a.value()->logits()) << rotate;
    EXPECT_EQ(test::Greedy(*b.value(), 12), test::Greedy(*a.value(), 12)) << rotate;
    if (std::string(rotate) == "auto") {  // a rotation this build does not know
      img->meta["kv_rotation"] = "hadamard-signs-v9";
      bytes = io::SerializeContext(img.value());
      auto bad = Session::LoadContextBytes(*e, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "ctx", {});
      ASSERT_FALSE(bad.ok());
      EXPECT_NE(bad.error().message.find("hadamard-signs-v9"), std::string::npos) << bad.error().message;
    }
  }
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim
