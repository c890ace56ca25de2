// The sampling chain (src/engine/sampler.cpp, llama.cpp's default order:
// repetition penalty, top-k, top-p, min-p, temperature): its distributions
// on small vocabularies computed by hand, and its draws against the plain
// full-sort reference (sampler_reference.h) on random logits up to a
// 128K vocabulary, every option combination.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kvtrim/engine.h"
#include "sampler_reference.h"
#include "test_util.h"
#include "tiny_llama.h"

namespace kvtrim {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

// How often each token comes out of `draws` samplers seeded 0, 1, ...
// (one draw each, after `history` is accepted).
std::vector<double> Frequencies(const std::vector<float>& logits, SamplingOptions o, const std::vector<int>& history,
                                int draws) {
  std::vector<double> f(logits.size(), 0.0);
  for (int s = 0; s < draws; ++s) {
    o.seed = static_cast<uint64_t>(s);
    Sampler sm(o);
    for (int t : history) sm.Accept(t);
    f[sm.Sample(logits)] += 1.0 / draws;
  }
  return f;
}

// Every frequency within 4.5 standard errors of its probability; tokens
// with probability 0 never drawn.
void ExpectDistribution(const std::vector<double>& freq, const std::vector<double>& p, int draws) {
  ASSERT_EQ(freq.size(), p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0) {
      EXPECT_EQ(freq[i], 0) << "token " << i;
      continue;
    }
    const double se = std::sqrt(p[i] * (1 - p[i]) / draws);
    EXPECT_NEAR(freq[i], p[i], 4.5 * se) << "token " << i;
  }
}

constexpr int kDraws = 20000;
// Ids 0..4; the order (logit down, id up) is 1, 4, 2, 0, 3.
const std::vector<float> kLogits = {1.f, 3.f, 2.f, -1.f, 3.f};

TEST(Sampler, TopKThenTopPThenTemperatureByHand) {
  // top-k 3 keeps {1, 4, 2}; at temperature 1 they weigh e^3, e^3, e^2:
  // p = 0.4223, 0.4223, 0.1554. top-p 0.8: 0.4223 < 0.8 <= 0.8446 keeps {1, 4}.
  // Temperature 0.5 on two equal logits: one half each.
  SamplingOptions o;
  o.top_k = 3, o.top_p = 0.8f, o.temp = 0.5f;
  ExpectDistribution(Frequencies(kLogits, o, {}, kDraws), {0, 0.5, 0, 0, 0.5}, kDraws);
  // top-p 0.85 reaches the third: {1, 4, 2} at temperature 0.5 weigh 1, 1, e^-2.
  o.top_p = 0.85f;
  const double z = 2 + std::exp(-2.0);
  ExpectDistribution(Frequencies(kLogits, o, {}, kDraws), {0, 1 / z, std::exp(-2.0) / z, 0, 1 / z}, kDraws);
}

TEST(Sampler, MinPOnTheTemperatureOneDistributionByHand) {
  // min-p 0.2 keeps p >= 0.2 p_max, i.e. logit >= 3 + ln 0.2 = 1.39: {1, 4, 2}
  // (not 0, whose p / p_max = e^-2 = 0.135). At temperature 2 they weigh
  // 1, 1, e^-0.5.
  SamplingOptions o;
  o.top_k = 0, o.top_p = 1.f, o.min_p = 0.2f, o.temp = 2.f;
  const double w = std::exp(-0.5), z = 2 + w;
  ExpectDistribution(Frequencies(kLogits, o, {}, kDraws), {0, 1 / z, w / z, 0, 1 / z}, kDraws);
  // min-p 0.1 lets 0 in (0.135 >= 0.1): weights 1, 1, e^-0.5, e^-1 (id 0).
  o.min_p = 0.1f;
  const double z2 = 2 + w + std::exp(-1.0);
  ExpectDistribution(Frequencies(kLogits, o, {}, kDraws), {std::exp(-1.0) / z2, 1 / z2, w / z2, 0, 1 / z2}, kDraws);
}

TEST(Sampler, RepeatPenaltyByHand) {
  // Penalty 2 on the history {1, 3, 3}: token 1's logit 3 (> 0) is halved
  // to 1.5, token 3's -1 (< 0) doubled to -2, once each however often seen.
  // Logits {1, 1.5, 2, -2, 3} at temperature 1, every filter off.
  SamplingOptions o;
  o.top_k = 0, o.top_p = 1.f, o.temp = 1.f, o.repeat_penalty = 2.f;
  const std::vector<double> e = {std::exp(1.0), std::exp(1.5), std::exp(2.0), std::exp(-2.0), std::exp(3.0)};
  const double z = e[0] + e[1] + e[2] + e[3] + e[4];
  std::vector<double> p;
  for (double x : e) p.push_back(x / z);
  ExpectDistribution(Frequencies(kLogits, o, {1, 3, 3}, kDraws), p, kDraws);
  // The reference's weights are these numbers too.
  const std::vector<double> w = test::ReferenceWeights(kLogits, o, {1, 3, 3});
  for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(w[i] / (z / e[4]), p[i], 1e-12) << i;
  // Greedy applies the penalty first: without it the tie 1/4 goes to 1, with it 4.
  o.temp = 0;
  Sampler plain({0.f, 0.9f, 1}), penalized(o);
  for (int t : {1, 3, 3}) penalized.Accept(t);
  EXPECT_EQ(plain.Sample(kLogits), 1);
  EXPECT_EQ(penalized.Sample(kLogits), 4);
}

TEST(Sampler, PenaltyLooksBackRepeatLastNTokens) {
  SamplingOptions o;
  o.top_k = 0, o.top_p = 1.f, o.temp = 1.f, o.repeat_penalty = 3.f, o.repeat_last_n = 2;
  // Of 1, 2, 4 only the last two are penalized: 2 and 4.
  ExpectDistribution(Frequencies(kLogits, o, {1, 2, 4}, kDraws),
                     [&] {
                       std::vector<double> w = test::ReferenceWeights(kLogits, o, {2, 4});
                       double z = 0;
                       for (double x : w) z += x;
                       for (double& x : w) x /= z;
                       return w;
                     }(),
                     kDraws);
  o.repeat_last_n = 0;  // none
  Sampler a(o), b(o);
  for (int t : {1, 2, 4}) a.Accept(t);
  for (int k = 0; k < 50; ++k) EXPECT_EQ(a.Sample(kLogits), b.Sample(kLogits));
}

TEST(Sampler, DrawsAsTheFullSortReferenceOnRandomLogits) {
  uint64_t rng = 5;
  int checked = 0;
  for (int n : {7, 300, 20000, 128256}) {
    for (float spread : {0.5f, 4.f, 20.f}) {  // flat (a large nucleus) to peaked (a tiny one)
      std::vector<float> logits(n);
      for (float& x : logits) x = spread * static_cast<float>(test::SplitMixUniform(&rng));
      for (int i = 0; i < n; i += 5) logits[i] = logits[i / 5];  // ties
      for (int top_k : {0, 1, 40, 1000})
        for (float top_p : {1.f, 0.9f, 0.5f})
          for (float min_p : {0.f, 0.05f}) {
            if (n > 20000 && (top_p == 0.5f || min_p > 0)) continue;  // the largest vocabulary: fewer combinations
            SamplingOptions o;
            o.top_k = top_k, o.top_p = top_p, o.min_p = min_p, o.temp = 0.8f, o.seed = 11;
            Sampler s(o);
            for (int k = 0; k < 3; ++k) {
              ASSERT_EQ(s.Sample(logits), test::ReferenceSample(logits, o, {}, test::DrawOf(11, k)))
                  << "n " << n << " spread " << spread << " top_k " << top_k << " top_p " << top_p << " min_p "
                  << min_p << " draw " << k;
              ++checked;
            }
          }
    }
  }
  EXPECT_EQ(checked, 3 * (3 * 4 * 3 * 2 * 3 + 3 * 4 * 2 * 1));
}

TEST(Sampler, TopKOneAndTemperatureZeroAreTheArgmax) {
  std::vector<float> logits = {0.5f, 2.f, 2.f, -1.f};
  SamplingOptions o;
  o.top_k = 1, o.temp = 5.f;
  Sampler k1(o), greedy({0.f, 0.9f, 1});
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(k1.Sample(logits), 1);  // the tie goes to the lower id
    EXPECT_EQ(greedy.Sample(logits), 1);
  }
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim
