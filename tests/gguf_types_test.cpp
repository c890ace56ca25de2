// Synthetic GGUF files: every metadata value type, nested arrays, a
// non-default alignment; and F16/BF16 copies of the needle model end to end.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "engine/engine_impl.h"
#include "io/gguf_writer.h"
#include "io/gguf.h"
#include "kernels/quant.h"
#include "model/weights.h"
#include "test_util.h"

namespace kvtrim {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

using io::GgufWriter;
using VT = io::GgufValueType;

TEST(GgufTypes, EveryValueTypeAndNestedArrays) {
  GgufWriter w(64);
  w.AddRaw("u8", 0, GgufWriter::Pod<uint8_t>(200));
  w.AddRaw("i8", 1, GgufWriter::Pod<int8_t>(-100));
  w.AddRaw("u16", 2, GgufWriter::Pod<uint16_t>(60000));
  w.AddRaw("i16", 3, GgufWriter::Pod<int16_t>(-30000));
  w.AddRaw("u32", 4, GgufWriter::Pod<uint32_t>(4000000000u));
  w.AddRaw("i32", 5, GgufWriter::Pod<int32_t>(-2000000000));
  w.AddRaw("f32", 6, GgufWriter::Pod<float>(1.5f));
  w.AddRaw("bool", 7, GgufWriter::Pod<uint8_t>(1));
  w.AddRaw("str", 8, GgufWriter::Str("héllo"));
  w.AddRaw("u64", 10, GgufWriter::Pod<uint64_t>(1ull << 60));
  w.AddRaw("i64", 11, GgufWriter::Pod<int64_t>(-(1ll << 60)));
  w.AddRaw("f64", 12, GgufWriter::Pod<double>(-0.25));
  // [[1, 2], [3]] as an array of arrays of i32, and an array of strings.
  std::string inner1 = GgufWriter::U32(5) + GgufWriter::Pod<uint64_t>(2) + GgufWriter::Pod<int32_t>(1) + GgufWriter::Pod<int32_t>(2);
  std::string inner2 = GgufWriter::U32(5) + GgufWriter::Pod<uint64_t>(1) + GgufWriter::Pod<int32_t>(3);
  w.AddRaw("nested", 9, GgufWriter::U32(9) + GgufWriter::Pod<uint64_t>(2) + inner1 + inner2);
  w.AddRaw("strs", 9, GgufWriter::U32(8) + GgufWriter::Pod<uint64_t>(2) + GgufWriter::Str("a") + GgufWriter::Str(""));
  w.AddRaw("general.alignment", 4, GgufWriter::Pod<uint32_t>(64));
  std::string t1(3 * 4, '\0'), t2(32 * 2, '\0');
  float vals[3] = {1.f, -2.f, 3.5f};
  std::memcpy(t1.data(), vals, sizeof vals);
  w.AddTensor("a", {3}, GgmlType::F32, t1);
  w.AddTensor("b", {32, 1}, GgmlType::BF16, t2);
  auto f = io::GgufFile::FromBytes(w.Bytes());
  ASSERT_TRUE(f.ok()) << f.error().message;
  const io::GgufFile& g = *f.value();
  EXPECT_EQ(g.GetInt("u8").value(), 200);
  EXPECT_EQ(g.GetInt("i8").value(), -100);
  EXPECT_EQ(g.GetInt("u16").value(), 60000);
  EXPECT_EQ(g.GetInt("i16").value(), -30000);
  EXPECT_EQ(g.GetInt("u32").value(), 4000000000ll);
  EXPECT_EQ(g.GetInt("i32").value(), -2000000000);
  EXPECT_EQ(g.GetFloat("f32").value(), 1.5);
  EXPECT_TRUE(g.GetBool("bool").value());
  EXPECT_EQ(g.GetString("str").value(), "héllo");
  EXPECT_EQ(g.GetInt("u64").value(), 1ll << 60);
  EXPECT_EQ(g.GetInt("i64").value(), -(1ll << 60));
  EXPECT_EQ(g.GetFloat("f64").value(), -0.25);
  auto nested = g.GetArray("nested", VT::ARRAY);
  ASSERT_TRUE(nested.ok());
  ASSERT_EQ(nested.value()->size(), 2u);
  const auto& a0 = std::get<io::GgufArray>((*nested.value())[0].v);
  const auto& a1 = std::get<io::GgufArray>((*nested.value())[1].v);
  ASSERT_EQ(a0.size(), 2u);
  EXPECT_EQ(a0[1].as_int(), 2);
  EXPECT_EQ(a1[0].as_int(), 3);
  EXPECT_EQ(g.GetArray("strs", VT::STRING).value()->size(), 2u);
  EXPECT_EQ(g.alignment(), 64u);
  const io::GgufTensorInfo* b = g.FindTensor("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->offset % 64, 0u);
  EXPECT_EQ(b->offset, 64u);  // "a" is 12 bytes, padded to the 64-byte alignment
  float got[3];
  std::memcpy(got, g.FindTensor("a")->data, sizeof got);
  EXPECT_EQ(got[2], 3.5f);
}

TEST(GgufTypes, BadAlignmentAndBoolAreErrors) {
  GgufWriter w;
  w.AddRaw("general.alignment", 4, GgufWriter::Pod<uint32_t>(48));
  EXPECT_NE(io::GgufFile::FromBytes(w.Bytes()).error().message.find("power of two"), std::string::npos);
  GgufWriter w2;
  w2.AddRaw("flag", 7, GgufWriter::Pod<uint8_t>(2));
  EXPECT_NE(io::GgufFile::FromBytes(w2.Bytes()).error().message.find("bad bool"), std::string::npos);
  GgufWriter w3;  // arrays nested deeper than the reader allows
  std::string v = GgufWriter::U32(5) + GgufWriter::Pod<uint64_t>(0);
  for (int d = 0; d < 12; ++d) v = GgufWriter::U32(9) + GgufWriter::Pod<uint64_t>(1) + v;
  w3.AddRaw("deep", 9, v);
  EXPECT_NE(io::GgufFile::FromBytes(w3.Bytes()).error().message.find("nested too deeply"), std::string::npos);
}

// The needle model with every 2-D weight re-stored as `type`.
std::string Retyped(GgmlType type) {
  auto f = io::GgufFile::Open(test::ModelPath("needle-3.7M-f32.gguf"));
  GgufWriter w;
  for (const auto& [k, v] : f.value()->metadata()) w.AddValue(k, v);
  for (const auto& t : f.value()->tensors()) {
    const bool matrix = t.shape.size() == 2;
    const GgmlType out = matrix ? type : GgmlType::F32;
    std::string data(RowBytes(out, t.shape[0]) * (t.n_elements / t.shape[0]), '\0');
    const float* src = reinterpret_cast<const float*>(t.data);
    const size_t row = RowBytes(out, t.shape[0]);
    for (size_t r = 0; r < t.n_elements / t.shape[0]; ++r)
      kernels::QuantizeRow(out, src + r * t.shape[0], data.data() + r * row, static_cast<int>(t.shape[0]));
    w.AddTensor(t.name, t.shape, out, data);
  }
  return w.Bytes();
}

TEST(GgufTypes, F16AndBf16WeightsRunEndToEnd) {
  const auto& g = test::Goldens()["logits"][0];
  ASSERT_EQ(g["model"], "needle-3.7M-f32.gguf");
  // Measured max |logit - golden| over the top 10: F16 7.1e-4, BF16 7.6e-3.
  for (auto [type, tol] : {std::pair{GgmlType::F16, 5e-3}, std::pair{GgmlType::BF16, 5e-2}}) {
    const std::string path = (std::filesystem::temp_directory_path() / ("kvtrim-needle-" + TypeName(type) + ".gguf")).string();
    std::ofstream(path, std::ios::binary) << Retyped(type);
    auto e = Engine::Load({path, 2});
    ASSERT_TRUE(e.ok()) << e.error().message;
    EXPECT_EQ(e.value()->impl().weights().layers[0].wq.type, type);
    auto s = Session::Create(*e.value(), {});
    ASSERT_TRUE(s.value()->Prefill(g["ids"].get<std::vector<int>>()).ok());
    std::vector<int> top = g["top_ids"].get<std::vector<int>>();
    std::vector<double> want = g["top_logits"].get<std::vector<double>>();
    double md = 0;
    for (size_t i = 0; i < top.size(); ++i) md = std::max(md, std::fabs(s.value()->logits()[top[i]] - want[i]));
    std::printf("%s weights: max |logit - golden| = %.5f\n", TypeName(type).c_str(), md);
    EXPECT_LE(md, tol) << TypeName(type);
    EXPECT_GT(md, 0.0) << "re-typed weights should not be bit-identical to f32";
    std::filesystem::remove(path);
  }
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim
