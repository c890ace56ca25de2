// The bf16 tile products (kernels/attention_bf16.h) against float64 sums of
// the operands rounded to bf16 by Eigen's bfloat16 (an independent rounding):
// Q K^T and P V over tile widths that do not fill a group, rows that do not
// fill a microkernel, head dims 32..128; then the causal pass with
// KvView::bf16_tiles against the float64 attention of the unrounded rows,
// within the error bf16 operands allow (derived per row below), outputs and
// the taps' probabilities, kept and recomputed, over f16 and q8_0 rows.
#include <gtest/gtest.h>

#include <Eigen/Core>
#include <cmath>
#include <cstdio>
#include <random>
#include <tuple>
#include <vector>

#include "eval/metrics.h"
#include "kernels/attention.h"
#include "kernels/attention_bf16.h"
#include "kernels/ref/attention_ref.h"
#include "kv/cache.h"
#include "kvtrim/engine.h"
#include "prose_prompt.h"
#include "test_util.h"

namespace kvtrim::kernels {
namespace {
namespace KVTRIM_TEST_UNIQUE {

using test::RandVec;

double B(float x) { return static_cast<double>(static_cast<float>(Eigen::bfloat16(x))); }
// A bf16 pair's low and high halves as floats.
float PairLoForTest(uint32_t w) { return static_cast<float>(Eigen::numext::bit_cast<Eigen::bfloat16>(static_cast<uint16_t>(w & 0xffffu))); }
float PairHiForTest(uint32_t w) { return static_cast<float>(Eigen::numext::bit_cast<Eigen::bfloat16>(static_cast<uint16_t>(w >> 16))); }

TEST(Bf16Tiles, ScoresEqualFloat64SumsOfRoundedOperands) {
  std::mt19937 rng(3);
  for (int d : {32, 64, 96, 128})
    for (int rows : {1, 2, 3, 4, 5, 13, 63})
      for (int w : {1, 15, 16, 17, 33, 100, 256}) {
        const std::vector<float> q = RandVec(rng, rows * d, 2.f), k = RandVec(rng, w * d, 2.f);
        std::vector<uint32_t> qp(rows * d / 2), kp(Bf16KeyPanelWords(w, d));
        PackRowsBf16(q.data(), rows, d, d, qp.data());
        PackKeysBf16(k.data(), w, d, kp.data());
        const int ld = w + 3;
        std::vector<float> s(rows * ld, 7.f);
        ScoresBf16(qp.data(), rows, kp.data(), w, d, s.data(), ld);
        for (int r = 0; r < rows; ++r) {
          for (int j = 0; j < w; ++j) {
            double want = 0, mag = 0;
            for (int i = 0; i < d; ++i) {
              want += B(q[r * d + i]) * B(k[j * d + i]);
              mag += std::fabs(B(q[r * d + i]) * B(k[j * d + i]));
            }
            ASSERT_NEAR(s[r * ld + j], want, 1e-6 * mag + 1e-7) << d << " " << rows << " " << w << " " << r << " " << j;
          }
          for (int j = w; j < ld; ++j) ASSERT_EQ(s[r * ld + j], 7.f);  // nothing written past w
        }
      }
}

TEST(Bf16Tiles, PvAddsFloat64SumsOfRoundedOperands) {
  std::mt19937 rng(4);
  for (int d : {32, 64, 96, 128})
    for (int rows : {1, 2, 4, 7, 63})
      for (int w : {1, 2, 17, 64, 255, 256}) {
        const int ld_p = w + 5;
        std::vector<float> p = RandVec(rng, rows * ld_p), v = RandVec(rng, w * d, 3.f), o0 = RandVec(rng, rows * d);
        for (int r = 0; r < rows; ++r)
          for (int j = w; j < ld_p; ++j) p[r * ld_p + j] = 1e30f;  // never read
        std::vector<uint32_t> vp(Bf16ValuePanelWords(w, d)), pp(rows * ((w + 1) / 2));
        PackValuesBf16(v.data(), w, d, vp.data());
        std::vector<float> o = o0;
        AccumulatePvBf16(p.data(), rows, ld_p, vp.data(), w, d, o.data(), d, pp.data());
        for (int r = 0; r < rows; ++r)
          for (int i = 0; i < d; ++i) {
            double want = o0[r * d + i], mag = std::fabs(o0[r * d + i]);
            for (int j = 0; j < w; ++j) {
              want += B(p[r * ld_p + j]) * B(v[j * d + i]);
              mag += std::fabs(B(p[r * ld_p + j]) * B(v[j * d + i]));
            }
            ASSERT_NEAR(o[r * d + i], want, 1e-6 * mag + 1e-7) << d << " " << rows << " " << w << " " << r << " " << i;
          }
      }
}

// The softmax's exp for bf16 probabilities against float64's: within 3e-7
// relative where e^y is a normal float, 0 below, exactly 1 at 0, NaN kept.
TEST(Bf16Tiles, ExpBelowZeroWithin3e7OfFloat64) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-87.f, 0.f);
  std::vector<float> ys;
  for (int i = 0; i <= 87000; ++i) ys.push_back(-0.001f * i);
  for (int i = 0; i < 100000; ++i) ys.push_back(u(rng));
  for (float y : {-1e-30f, -0.34657f, -0.34658f, -0.6931472f, -0.6931471f, -86.9f}) ys.push_back(y);
  double worst = 0;
  for (float y : ys) {
    const double want = std::exp(static_cast<double>(y)), got = ExpBelowZero(y);
    worst = std::max(worst, std::fabs(got - want) / want);
    ASSERT_NEAR(got, want, 3e-7 * want) << "y " << y;
  }
  std::printf("ExpBelowZero: worst relative error %.3g over %zu points\n", worst, ys.size());
  EXPECT_EQ(ExpBelowZero(0.f), 1.f);
  EXPECT_EQ(ExpBelowZero(-110.f), 0.f);
  EXPECT_EQ(ExpBelowZero(-1e30f), 0.f);
  EXPECT_EQ(ExpBelowZero(-INFINITY), 0.f);
  EXPECT_TRUE(std::isnan(ExpBelowZero(NAN)));
}

// One row of the online softmax with bf16 output against its definition:
// the max of s * scale + b over the visible entries and m, each
// probability bf16(exp(x - m_new)) within bf16's rounding of float64's exp,
// 0 past vis and for a -inf log-weight, the sum of the exps, nothing
// written past ceil(w / 2) words; every word 0 while nothing has weight.
TEST(Bf16Tiles, SoftmaxRowEqualsItsDefinition) {
  std::mt19937 rng(6);
  for (int w : {1, 2, 15, 16, 17, 31, 32, 33, 100, 255, 256})
    for (int vis : {0, 1, w / 2, w - 1, w})
      for (float m : {-INFINITY, -3.f, 40.f}) {
        std::vector<float> s = RandVec(rng, w, 20.f), b(w, 0.f);
        for (int j = 0; j < w; ++j) b[j] = j % 7 == 3 ? -INFINITY : j % 5 == 1 ? -0.7f : 0.f;
        const int wp = (w + 1) / 2;
        std::vector<uint32_t> pp(wp + 2, 0xdeadbeefu);
        const float scale = 0.37f;
        float m_new = 0.f;
        const float sum = SoftmaxRowBf16(s.data(), vis, w, scale, b.data(), m, &m_new, pp.data());
        float want_m = m;
        for (int j = 0; j < vis; ++j) want_m = std::max(want_m, std::fma(s[j], scale, b[j]));
        ASSERT_EQ(m_new, want_m) << w << " " << vis << " " << m;
        double want_sum = 0;
        for (int j = 0; j < 2 * wp; ++j) {
          const uint32_t word = pp[j / 2];
          const double got = j % 2 ? PairHiForTest(word) : PairLoForTest(word);
          double want = 0;
          if (j < vis && want_m != -INFINITY) want = std::exp(static_cast<double>(std::fma(s[j], scale, b[j]) - want_m));
          want_sum += want;
          ASSERT_NEAR(got, want, want * (std::ldexp(1.0, -8) + 3e-7)) << w << " " << vis << " " << m << " entry " << j;
          if (j < vis && want_m != -INFINITY) {  // the vector exp is ExpBelowZero's operations: the same bits
            ASSERT_EQ(got, B(ExpBelowZero(std::fma(s[j], scale, b[j]) - want_m))) << w << " " << vis << " entry " << j;
          }
        }
        ASSERT_NEAR(sum, want_sum, 1e-6 * want_sum + 1e-30) << w << " " << vis << " " << m;
        EXPECT_EQ(pp[wp], 0xdeadbeefu);
        EXPECT_EQ(pp[wp + 1], 0xdeadbeefu);
      }
}

// A causal pass over a head with bf16 tiles against the float64 attention of
// the stored rows. The bound per row: a score's error is at most
// e_s = scale * sum_i |q_i k_i| * 2^-7 (q and k each rounded by at most
// 2^-8 relative, bf16's unit roundoff with its 8-bit significand; their
// product by 2^-7 + 2^-16), so each probability is off
// by a factor within exp(+-2 e_s) (its score and the normalizer's), and P
// and V are rounded once more (2^-8 each, 2^-7 together):
// |out - ref| <= max|v| * (exp(2 e_s) - 1 + 2^-7) plus the f32 sums' 1e-5.
struct Bf16Pass : ::testing::Test {
  void SetUp() override {
    if (!HasBf16Tiles()) GTEST_SKIP() << "no AVX512-BF16 on this CPU: the pass keeps its f32 tiles";
  }
};

TEST_F(Bf16Pass, OutputsAndTapsWithinTheRoundingBound) {
  std::mt19937 rng(7);
  for (int G : {1, 3})
    for (const auto& [n0, T, type] : {std::tuple{0, 70, GgmlType::F16}, std::tuple{300, 90, GgmlType::Q8_0},
                                      std::tuple{kKeepEntries + 30, 20, GgmlType::F16}}) {
      const int d = 64;
      kv::HeadStore store(d, type);
      std::vector<std::vector<float>> k, v;
      std::vector<float> b;
      for (int j = 0; j < n0 + T; ++j) {
        const std::vector<float> kk = RandVec(rng, d, 1.5f), vv = RandVec(rng, d);
        store.Append(kk.data(), vv.data(), j, j % 11 == 4 ? -0.5f : 0.f);
        k.emplace_back(d), v.emplace_back(d);
        store.ReadKey(j, k.back().data());
        store.ReadValue(j, v.back().data());
        b.push_back(j % 11 == 4 ? -0.5f : 0.f);
      }
      const float scale = 0.125f;
      const std::vector<float> q = RandVec(rng, T * G * d, 1.5f);
      KvView view = store.View();
      view.bf16_tiles = true;
      std::vector<float> out(T * G * d), f32(T * G * d);
      std::vector<std::vector<float>> probs(T * G);  // the taps' rows, assembled from tiles
      TileObserver obs = [&](const ProbTile& tile) {
        for (int t = tile.t0; t < tile.t1; ++t)
          for (int g = 0; g < tile.G; ++g) {
            std::vector<float>& row = probs[t * G + g];
            row.resize(std::max<size_t>(row.size(), tile.j1), -1.f);
            for (int j = tile.j0; j < tile.j1; ++j) row[j] = tile.Row(t, g)[j - tile.j0];
          }
      };
      AttendCausal(view, q.data(), T, G, G * d, n0, scale, out.data(), G * d, &obs);
      AttendCausal(store.View(), q.data(), T, G, G * d, n0, scale, f32.data(), G * d);
      std::vector<float> plain(T * G * d);  // no taps: the probabilities go to bf16 as they are made
      AttendCausal(view, q.data(), T, G, G * d, n0, scale, plain.data(), G * d);
      double worst_ratio = 0, differs = 0;
      for (int t = 0; t < T; ++t)
        for (int g = 0; g < G; ++g) {
          const int r = t * G + g, vis = n0 + t + 1;
          const float* qr = &q[r * d];
          std::vector<std::vector<float>> kv_k(k.begin(), k.begin() + vis), kv_v(v.begin(), v.begin() + vis);
          std::vector<double> p;
          const std::vector<double> want =
              ref::Attend(std::vector<float>(qr, qr + d), kv_k, kv_v, std::vector<float>(b.begin(), b.begin() + vis), scale, &p);
          double es = 0, vmax = 0;
          for (int j = 0; j < vis; ++j) {
            double m = 0;
            for (int i = 0; i < d; ++i) m += std::fabs(static_cast<double>(qr[i]) * k[j][i]), vmax = std::max(vmax, std::fabs(static_cast<double>(v[j][i])));
            es = std::max(es, scale * m * std::ldexp(1.0, -7));
          }
          const double tol = vmax * (std::exp(2 * es) - 1 + std::ldexp(1.0, -7)) + 1e-5;
          for (int i = 0; i < d; ++i) {
            const double err = std::fabs(out[r * d + i] - want[i]);
            ASSERT_LE(err, tol) << "G " << G << " n0 " << n0 << " row " << r << " dim " << i;
            ASSERT_LE(std::fabs(plain[r * d + i] - want[i]), tol) << "no taps: G " << G << " n0 " << n0 << " row " << r;
            worst_ratio = std::max(worst_ratio, err / tol);
            differs = std::max(differs, static_cast<double>(std::fabs(out[r * d + i] - f32[r * d + i])));
          }
          ASSERT_GE(probs[r].size(), static_cast<size_t>(vis));
          for (int j = 0; j < vis; ++j)
            ASSERT_NEAR(probs[r][j], p[j], p[j] * (std::exp(2 * es) - 1) + 1e-6) << "row " << r << " entry " << j;
        }
      EXPECT_GT(differs, 1e-6) << "the bf16 tiles did not run";  // f32 tiles agree with the reference to 3e-5
      EXPECT_LT(worst_ratio, 1.0);
    }
}

// The model with --bf16-attention all against off on a 1,000-token prose
// prompt (every position's logits): the full cache's next-token
// distributions move by the bf16 rounding only (mean KL per position under
// 1e-3 nats, the bound the option's default is judged by), and "pass" leaves
// a prefill without a reference pass exactly as "off".
TEST_F(Bf16Pass, PrefillLogitsMoveLittleAndPassLeavesThePrefillAlone) {
  auto e = test::LoadEngine("needle-v1-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  const std::vector<int> toks = test::ProsePrompt(*e, 1000);
  auto logits_with = [&](const char* mode) {
    SessionOptions so;
    so.kv.bf16_attention = mode;
    auto s = Session::Create(*e, so);
    EXPECT_TRUE(s.ok());
    auto all = s.value()->ForwardAll(toks);
    EXPECT_TRUE(all.ok());
    return all.value();
  };
  const std::vector<float> off = logits_with("off"), pass = logits_with("pass"), all = logits_with("all");
  EXPECT_EQ(off, pass);
  const size_t V = off.size() / toks.size();
  double kl = 0, worst = 0;
  for (size_t t = 0; t < toks.size(); ++t) {
    const double k = eval::KlDivergence(&off[t * V], &all[t * V], V);
    kl += k / toks.size(), worst = std::max(worst, k);
  }
  std::printf("bf16 tiles against f32, %zu positions: mean KL %.3g nats, worst %.3g\n", toks.size(), kl, worst);
  EXPECT_GT(kl, 0.0);  // the bf16 tiles ran
  EXPECT_LT(kl, 1e-3) << "worst position " << worst;
}

// The library refuses a value the option table does not list, naming it
// (the CLI and the server check the table's choices; a library caller
// reaches Session::Create directly).
TEST(Bf16Option, UnknownValueIsAnErrorNamingIt) {
  auto e = test::LoadEngine("needle-v1-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  SessionOptions so;
  so.kv.bf16_attention = "fast";
  auto s = Session::Create(*e, so);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("'fast' (pass, all, off)"), std::string::npos) << s.error().message;
  EXPECT_FALSE(Bf16TileDim(kMaxBf16TileDim + 32));  // past the packer's stack row: the f32 tiles
  EXPECT_TRUE(Bf16TileDim(128));
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::kernels
