// KVzip's shared budget over a chunked prefill (docs/prefill-chunk.md): after
// each chunk one top-k runs over every head's entries held, the carried
// scores of the compressed past and the chunk's new ones. By hand on a
// two-chunk cache: the kept set after the last chunk is the top of the
// carried scores over all heads, by a full sort (the same on a model:
// PrefillChunk.KvzipSharedBudgetStreams*, prefill_chunk_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "global_top.h"
#include "kv/cache.h"
#include "kv/compressor.h"
#include "kv/stats.h"
#include "kv/taps/max_prob.h"

namespace kvtrim::kv {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

constexpr int kL = 2, kH = 2, kD = 4;

void AppendEntries(HeadStore* h, int from, int n) {
  std::vector<float> z(kD, 0.f);
  for (int i = 0; i < n; ++i) h->Append(z.data(), z.data(), from + i, 0.f);
}

// The reconstruction's scores of one chunk, per head (l * kH + h).
void SetScores(Compressor* c, const std::vector<std::vector<double>>& s) {
  for (int l = 0; l < kL; ++l)
    for (int h = 0; h < kH; ++h) {
      std::vector<float> f(s[l * kH + h].begin(), s[l * kH + h].end());
      c->stats().head(l, h).reference = TapSet{};
      c->stats().head(l, h).reference.Add(kMaxProbTap, std::make_unique<MaxProbStat>(f));
    }
}

std::vector<std::vector<int>> Positions(const KvCache& cache) {
  std::vector<std::vector<int>> out;
  for (int l = 0; l < kL; ++l)
    for (int h = 0; h < kH; ++h) {
      out.emplace_back();
      for (int i = 0; i < cache.head(l, h).size(); ++i) out.back().push_back(cache.head(l, h).pos(i));
    }
  return out;
}

TEST(KvzipStream, TheLastChunkKeepsTheTopOfTheCarriedScoresOverAllHeads) {
  // A 12-token prompt in two chunks of 6; r = 1/4: 3 per head, 12 in all.
  KvOptions o;
  o.policy = "kvzip", o.ratio = 0.25, o.ratio_explicit = true;
  o.params = test::kKvzipPlain;
  auto made = Compressor::Create(o, kL, kH, 1, kD);
  ASSERT_TRUE(made.ok()) << made.error().message;
  Compressor& c = *made.value();
  KvCache cache(kL, kH, kD);
  for (int l = 0; l < kL; ++l)
    for (int h = 0; h < kH; ++h) AppendEntries(&cache.head(l, h), 0, 6);
  cache.AdvanceLogical(6);
  // Chunk 1: head (0, 0) is the one the reconstruction leans on.
  const std::vector<std::vector<double>> s1 = {{0.90, 0.85, 0.80, 0.75, 0.70, 0.65},
                                               {0.10, 0.02, 0.03, 0.04, 0.05, 0.06},
                                               {0.30, 0.20, 0.60, 0.01, 0.07, 0.08},
                                               {0.09, 0.011, 0.012, 0.013, 0.55, 0.014}};
  c.BeginChunk(6, true, 0);
  SetScores(&c, s1);
  ASSERT_TRUE(c.CompressChunk(cache, 12).ok());
  // Floors 0.90, 0.10, 0.60, 0.55, then the best 8 of the rest:
  // 0.85 0.80 0.75 0.70 0.65 (head 0), 0.30 0.20 (head 2), 0.09 (head 3).
  const std::vector<std::vector<int>> after1 = test::GlobalTopWithFloor(s1, 12);
  ASSERT_EQ(Positions(cache), after1);
  ASSERT_EQ(c.shared_counts(), (std::vector<int>{6, 1, 3, 2}));

  // Chunk 2: the reconstruction now leans on head (1, 1); the past's scores
  // from this pass are low except one, which rises.
  for (int l = 0; l < kL; ++l)
    for (int h = 0; h < kH; ++h) AppendEntries(&cache.head(l, h), 6, 6);
  cache.AdvanceLogical(6);
  std::vector<std::vector<double>> s2(kL * kH), carried(kL * kH);
  std::mt19937 g(7);
  std::uniform_real_distribution<double> low(0.0, 0.05);
  for (int f = 0; f < kL * kH; ++f) {
    for (int j : after1[f]) s2[f].push_back(low(g)), carried[f].push_back(s1[f][j]);
    for (int j = 0; j < 6; ++j) s2[f].push_back(low(g));
  }
  s2[3].back() = 0.95, s2[3][s2[3].size() - 2] = 0.88, s2[3][s2[3].size() - 3] = 0.83;  // head 3's new entries
  s2[1][0] = 0.78;  // head 1's one past entry (carried 0.10) rises
  c.BeginChunk(12, false, 6);
  SetScores(&c, s2);
  ASSERT_TRUE(c.CompressPrefill(cache).ok());
  // By hand: each entry's score is the larger of its carried and this pass's.
  std::vector<std::vector<double>> combined = s2;
  for (int f = 0; f < kL * kH; ++f)
    for (size_t i = 0; i < carried[f].size(); ++i) combined[f][i] = std::max(carried[f][i], s2[f][i]);
  const std::vector<std::vector<int>> top = test::GlobalTopWithFloor(combined, 12);
  std::vector<std::vector<int>> want(kL * kH);
  for (int f = 0; f < kL * kH; ++f)
    for (int i : top[f]) want[f].push_back(i < static_cast<int>(after1[f].size()) ? after1[f][i] : 6 + i - static_cast<int>(after1[f].size()));
  EXPECT_EQ(Positions(cache), want);
  // The shares moved: head (1, 1) grew from 2 by its new best entries,
  // head (1, 0) shrank from 3 to its best (0.60); head (0, 0) kept its six
  // carried ones (0.90..0.65), none of this pass's.
  EXPECT_EQ(c.shared_counts(), (std::vector<int>{6, 1, 1, 4}));
  for (int f = 0; f < kL * kH; ++f) EXPECT_EQ(c.shared_counts()[f], static_cast<int>(want[f].size()));
  int held = 0;
  for (const auto& w : want) held += static_cast<int>(w.size());
  EXPECT_EQ(held, 12);
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::kv
