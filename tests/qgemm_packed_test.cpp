// The repacked (row-lane) integer prefill products (kernels/qgemm_packed.h):
// the repack against the stored blocks, every path against the float64
// reference of the same integer scheme, row ranges, and MatMul's wiring.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "test_util.h"
#include "kernels/cpu.h"
#include "kernels/matmul.h"
#include "kernels/qgemm.h"
#include "kernels/qgemm_packed.h"
#include "kernels/quant.h"
#include "kernels/ref/qgemm_ref.h"
#include "kernels/ref/quant_ref.h"

namespace kvtrim::kernels {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

using test::RandVec;

struct PathGuard {
  explicit PathGuard(KernelPath p) : old(SetKernelPath(p)) {}
  ~PathGuard() { SetKernelPath(old); }
  KernelPath old;
};

std::vector<KernelPath> Paths() {
  std::vector<KernelPath> ps;
  for (KernelPath p : {KernelPath::kScalar, KernelPath::kAvx2, KernelPath::kAvx512})
    if (p <= BestKernelPath()) ps.push_back(p);
  return ps;
}

std::vector<uint8_t> RandRows(std::mt19937& rng, GgmlType type, int rows, int cols) {
  const size_t rb = RowBytes(type, cols);
  std::vector<uint8_t> data(rb * rows);
  for (int r = 0; r < rows; ++r) QuantizeRow(type, RandVec(rng, cols).data(), data.data() + rb * r, cols);
  return data;
}

// sum_b |d_w d_x| sum_j |q_w q_x|: the scale of the float rounding.
double AbsMass(GgmlType type, const uint8_t* row, const int16_t* xq, const float* xd, int nb) {
  std::vector<float> wf(static_cast<size_t>(nb) * 32);
  ref::DequantRow(type, row, wf.data(), nb * 32);
  double m = 0;
  for (int j = 0; j < nb * 32; ++j) m += std::fabs(static_cast<double>(wf[j]) * xq[j] * xd[j / 32]);
  return m;
}

// Unpacking gives back every stored code and scale (codes x scale = the
// reference dequantization, exactly); padded rows are zero.
TEST(PackedGemm, RepackRoundTrips) {
  std::mt19937 rng(3);
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0}) {
    const int rows = 37, cols = 96, nb = 3;
    std::vector<uint8_t> data = RandRows(rng, type, rows, cols);
    WeightView w{type, data.data(), rows, cols};
    ASSERT_TRUE(PackSupports(w));
    const PackedWeights p = PackWeights(w);
    ASSERT_EQ(p.tiles, 3);
    // Q8_0: 32 int8 codes + a float scale per row and block; Q4_0 keeps 4-bit codes.
    EXPECT_EQ(p.nibbles, type == GgmlType::Q4_0);
    EXPECT_EQ(p.bytes(), 3u * nb * ((type == GgmlType::Q4_0 ? 256 : 512) + 64));
    std::vector<float> wf(cols);
    int8_t codes[32];
    float d = 0;
    for (int r = 0; r < rows; ++r) {
      ref::DequantRow(type, w.row(r), wf.data(), cols);
      for (int b = 0; b < nb; ++b) {
        UnpackBlock(p, r, b, codes, &d);
        uint16_t h;
        std::memcpy(&h, w.row(r) + (type == GgmlType::Q4_0 ? 18 : 34) * b, 2);
        ASSERT_EQ(d, F16ToF32(h));
        for (int j = 0; j < 32; ++j) {
          ASSERT_EQ(static_cast<float>(codes[j]) * d, wf[b * 32 + j]) << TypeName(type) << " r " << r << " j " << j;
          if (type == GgmlType::Q8_0) ASSERT_EQ(codes[j], static_cast<int8_t>(w.row(r)[34 * b + 2 + j]));
          else ASSERT_TRUE(codes[j] >= -8 && codes[j] <= 7);
        }
      }
    }
    for (int r = rows; r < 48; ++r) {
      for (int b = 0; b < nb; ++b) {
        UnpackBlock(p, r, b, codes, &d);
        EXPECT_EQ(d, 0.f);
        for (int j = 0; j < 32; ++j) EXPECT_EQ(codes[j], 0);
      }
    }
  }
  WeightView f32{GgmlType::F32, nullptr, 4, 32};
  EXPECT_FALSE(PackSupports(f32));
  WeightView odd{GgmlType::Q8_0, nullptr, 4, 48};
  EXPECT_FALSE(PackSupports(odd));
}

struct Shape {
  int rows, cols, T;
};

// Every path x {Q8_0, Q4_0}; rows not multiples of the 16/32-row tiles,
// tokens not multiples of the 4-token tile; cols 32/256/768.
TEST(PackedGemm, EveryPathMatchesFloat64Reference) {
  std::mt19937 rng(7);
  for (KernelPath path : Paths()) {
    PathGuard guard(path);
    ASSERT_EQ(PackedKernelPath(), path);
    for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0}) {
      for (Shape s : {Shape{1, 32, 1}, Shape{37, 256, 9}, Shape{21, 768, 6}, Shape{50, 32, 13}, Shape{33, 256, 35},
                      Shape{64, 768, 4}}) {
        std::vector<uint8_t> data = RandRows(rng, type, s.rows, s.cols);
        WeightView w{type, data.data(), s.rows, s.cols};
        const PackedWeights p = PackWeights(w);
        std::vector<float> x = RandVec(rng, s.T * s.cols);
        QActs a;
        QuantizeActs(x.data(), s.T, s.cols, &a);
        const int ldy = s.rows + 3;
        std::vector<float> y(static_cast<size_t>(s.T) * ldy, -7.f);
        PackedGemmRows(p, a, 0, s.rows, y.data(), ldy);
        for (int t = 0; t < s.T; ++t) {
          const int16_t* xq = &a.q[static_cast<size_t>(t) * s.cols];
          const float* xd = &a.d[static_cast<size_t>(t) * a.nb];
          for (int r = 0; r < s.rows; ++r) {
            const double want = ref::QDotRow(type, w.row(r), xq, xd, a.nb);
            const double mass = AbsMass(type, w.row(r), xq, xd, a.nb);
            ASSERT_NEAR(y[t * ldy + r], want, 1e-5 * mass + 1e-30)
                << KernelPathName(path) << " " << TypeName(type) << " " << s.rows << "x" << s.cols << " r " << r
                << " t " << t;
          }
          for (int r = s.rows; r < ldy; ++r) ASSERT_EQ(y[t * ldy + r], -7.f) << KernelPathName(path);
        }
      }
    }
  }
}

// A row range that starts and ends inside tiles: its rows equal the whole
// product's, every other row is untouched.
TEST(PackedGemm, RowsOutsideTheRangeUntouched) {
  std::mt19937 rng(9);
  const int rows = 70, cols = 64, T = 7;
  for (KernelPath path : Paths()) {
    PathGuard guard(path);
    for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0}) {
      std::vector<uint8_t> data = RandRows(rng, type, rows, cols);
      const PackedWeights p = PackWeights(WeightView{type, data.data(), rows, cols});
      std::vector<float> x = RandVec(rng, T * cols);
      QActs a;
      QuantizeActs(x.data(), T, cols, &a);
      std::vector<float> full(static_cast<size_t>(T) * rows), y(static_cast<size_t>(T) * rows, -7.f);
      PackedGemmRows(p, a, 0, rows, full.data(), rows);
      for (auto [r0, r1] : {std::pair{5, 29}, std::pair{17, 18}, std::pair{33, 70}}) {
        std::fill(y.begin(), y.end(), -7.f);
        PackedGemmRows(p, a, r0, r1, y.data(), rows);
        for (int t = 0; t < T; ++t)
          for (int r = 0; r < rows; ++r)
            ASSERT_EQ(y[t * rows + r], r >= r0 && r < r1 ? full[t * rows + r] : -7.f)
                << KernelPathName(path) << " [" << r0 << ", " << r1 << ") r " << r << " t " << t;
      }
    }
  }
}

// MatMul reads the repack at every batch size when the view has one: a view
// whose `packed` was built from OTHER weights gives those weights' products;
// the same view without it gives its own rows'. Two threads split the tiles.
TEST(PackedGemm, MatMulUsesTheRepackWhereTheViewHasOne) {
  std::mt19937 rng(13);
  ThreadPool pool(2);
  const int rows = 45, cols = 96;
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0}) {
    std::vector<uint8_t> own = RandRows(rng, type, rows, cols), other = RandRows(rng, type, rows, cols);
    const PackedWeights p = PackWeights(WeightView{type, other.data(), rows, cols});
    for (auto [T, with_pack] : {std::pair{1, true}, std::pair{8, true}, std::pair{40, true}, std::pair{1, false},
                                std::pair{8, false}}) {
      WeightView w{type, own.data(), rows, cols};
      if (with_pack) w.packed = &p;
      std::vector<float> x = RandVec(rng, T * cols), y(static_cast<size_t>(T) * rows);
      MatMul(pool, w, x.data(), T, y.data());
      QActs a;
      QuantizeActs(x.data(), T, cols, &a);
      const uint8_t* src = with_pack ? other.data() : own.data();
      for (int t = 0; t < T; ++t) {
        for (int r = 0; r < rows; ++r) {
          const uint8_t* row = src + RowBytes(type, cols) * r;
          const int16_t* xq = &a.q[static_cast<size_t>(t) * cols];
          const float* xd = &a.d[static_cast<size_t>(t) * a.nb];
          const double want = ref::QDotRow(type, row, xq, xd, a.nb);
          ASSERT_NEAR(y[t * rows + r], want, 1e-5 * AbsMass(type, row, xq, xd, a.nb) + 1e-30)
              << TypeName(type) << " T " << T << " r " << r;
        }
      }
    }
  }
}

// MatMulShared's products equal MatMul's bit for bit: three repacked
// matrices of one input (rows 45, 16 and 7: tiles 3 + 1 + 1, which two
// threads split inside the first matrix and three also where the second
// begins, at T = 40), one to three threads, decode and batch sizes; and
// with one view lacking a repack, every product through MatMul.
TEST(PackedGemm, SharedInputProductsEqualOneMatMulEach) {
  std::mt19937 rng(17);
  const int cols = 96;
  const int rows[3] = {45, 16, 7};
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0}) {
    std::vector<uint8_t> data[3];
    PackedWeights packs[3];
    WeightView views[3];
    for (int i = 0; i < 3; ++i) {
      data[i] = RandRows(rng, type, rows[i], cols);
      views[i] = WeightView{type, data[i].data(), rows[i], cols};
      packs[i] = PackWeights(views[i]);
      views[i].packed = &packs[i];
    }
    for (int threads : {1, 2, 3})
      for (int T : {1, 3, 40})
        for (bool all_packed : {true, false}) {
          ThreadPool pool(threads);
          WeightView v1 = views[1];
          if (!all_packed) v1.packed = nullptr;
          const std::vector<float> x = RandVec(rng, T * cols);
          std::vector<float> want[3], got[3];
          const WeightView* ws[3] = {&views[0], &v1, &views[2]};
          for (int i = 0; i < 3; ++i) {
            want[i].assign(static_cast<size_t>(T) * rows[i], 0.f);
            got[i].assign(static_cast<size_t>(T) * rows[i], -1.f);
            MatMul(pool, *ws[i], x.data(), T, want[i].data());
          }
          MatMulShared(pool, {{ws[0], got[0].data()}, {ws[1], got[1].data()}, {ws[2], got[2].data()}}, x.data(), T);
          for (int i = 0; i < 3; ++i)
            for (size_t j = 0; j < want[i].size(); ++j)
              ASSERT_EQ(got[i][j], want[i][j]) << TypeName(type) << " threads " << threads << " T " << T
                                               << " packed " << all_packed << " product " << i << " at " << j;
        }
  }
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::kernels
