// Reused scratch buffers (kernels/scratch.h HugeScratch): a lease takes the
// smallest free buffer large enough or a new one, gives it back when it
// ends, and the free list never holds more buffers than were leased at once;
// Attention Matching's fit with its scores buffer taken from a scratch whose
// buffers hold another fit's numbers (or NaN) gives the fit of a fresh
// buffer, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/scratch.h"
#include "kv/numerics/eigen.h"
#include "kv/policies/am_fit.h"

namespace kvtrim {
namespace {

TEST(HugeScratch, ReusesTheSmallestFreeBufferThatFits) {
  kernels::HugeScratch s;
  float *a = nullptr, *b = nullptr;
  {
    auto la = s.Take(1000), lb = s.Take(5000);  // two at once: two buffers
    a = la.get(), b = lb.get();
    ASSERT_NE(a, b);
    for (int i = 0; i < 1000; ++i) a[i] = 1.0f;  // writable to its size
    for (int i = 0; i < 5000; ++i) b[i] = 2.0f;
    EXPECT_EQ(s.held(), 0u);
  }
  EXPECT_EQ(s.held(), 2u);
  {
    auto l = s.Take(900);  // both fit: the smaller
    EXPECT_EQ(l.get(), a);
    auto m = s.Take(3000);  // only the larger fits
    EXPECT_EQ(m.get(), b);
    EXPECT_EQ(s.held(), 0u);
  }
  EXPECT_EQ(s.held(), 2u);
}

TEST(HugeScratch, HoldsNoMoreBuffersThanWereLeasedAtOnce) {
  kernels::HugeScratch s;
  { auto a = s.Take(100), b = s.Take(200); }
  ASSERT_EQ(s.held(), 2u);
  {
    auto big = s.Take(size_t{1} << 20);  // none fits: a new one, the largest free (too small) freed
    EXPECT_EQ(s.held(), 1u);
    big.get()[(size_t{1} << 20) - 1] = 3.0f;
  }
  EXPECT_EQ(s.held(), 2u);
  for (int i = 0; i < 10; ++i) auto l = s.Take(size_t{1} << 19);  // one at a time: reused, none added
  EXPECT_EQ(s.held(), 2u);
}

kv::AmBlockFit Fit(const Eigen::MatrixXf& Q, const Eigen::MatrixXf& K, const Eigen::MatrixXf& V, int t,
                   kernels::HugeScratch* scratch) {
  kv::AmConfig c;
  c.scratch = scratch;
  return kv::AmFitBlock(Q, K, V, Eigen::VectorXd::Zero(K.rows()), t, c);
}

TEST(HugeScratch, AmFitReadsNothingABufferHeldBefore) {
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0.0f, 1.0f);
  auto random = [&](int r, int c) {
    Eigen::MatrixXf m(r, c);
    for (int i = 0; i < r; ++i)
      for (int j = 0; j < c; ++j) m(i, j) = g(rng);
    return m;
  };
  const Eigen::MatrixXf Q = random(300, 32) * 0.3f, K = random(90, 32), V = random(90, 32);
  const kv::AmBlockFit fresh = Fit(Q, K, V, 12, nullptr);
  kernels::HugeScratch s;
  {  // a buffer larger than the fit's [300, 90], full of NaN
    auto l = s.Take(300 * 90 * 2);
    for (int i = 0; i < 300 * 90 * 2; ++i) l.get()[i] = std::numeric_limits<float>::quiet_NaN();
  }
  for (int round = 0; round < 2; ++round) {  // then holding the first fit's scores
    const kv::AmBlockFit f = Fit(Q, K, V, 12, &s);
    EXPECT_EQ(s.held(), 1u);
    EXPECT_EQ(f.keep, fresh.keep);
    EXPECT_EQ(f.logw, fresh.logw);
    EXPECT_EQ(f.values, fresh.values);
    ASSERT_EQ(f.keep.size(), 12u);
  }
}

}  // namespace
}  // namespace kvtrim
