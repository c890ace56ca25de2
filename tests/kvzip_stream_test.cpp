// KVzip's shared budget over a chunked prefill (docs/prefill-chunk.md): after
// each chunk one top-k runs over every head's entries held, the carried
// scores of the compressed past and the chunk's new ones. By hand on a
// two-chunk cache (the kept set after the last chunk is the top of the
// carried scores over all heads, by a full sort), then on a model: a chunk
// at least the prompt is the one-shot bit for bit, the first chunk is the
// one-shot of that chunk alone, no head holds more than its share after any
// chunk, and the shares move between chunks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "engine/engine_impl.h"
#include "global_top.h"
#include "kv/cache.h"
#include "kv/compressor.h"
#include "kv/stats.h"
#include "kv/taps/max_prob.h"
#include "kvtrim/engine.h"
#include "test_util.h"

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

void ExpectSameCache(const KvCache& a, const KvCache& b, const std::string& what) {
  ASSERT_EQ(a.logical_length(), b.logical_length()) << what;
  for (int l = 0; l < a.n_layer(); ++l)
    for (int h = 0; h < a.n_head_kv(); ++h) {
      const HeadStore &x = a.head(l, h), &y = b.head(l, h);
      ASSERT_EQ(x.size(), y.size()) << what << " layer " << l << " head " << h;
      for (int i = 0; i < x.size(); ++i) {
        ASSERT_EQ(x.pos(i), y.pos(i)) << what << " layer " << l << " head " << h << " entry " << i;
        ASSERT_EQ(std::memcmp(x.key_row(i), y.key_row(i), x.row_bytes()), 0) << what << " key " << i;
        ASSERT_EQ(std::memcmp(x.value_row(i), y.value_row(i), x.row_bytes()), 0) << what << " value " << i;
      }
    }
}

std::vector<int> Tokens(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<int> t(n);
  t[0] = 1;  // BOS
  for (int i = 1; i < n; ++i) t[i] = 3 + static_cast<int>(rng() % 500);
  return t;
}

void SharedBudgetStreams(const std::string& policy) {
  auto e = test::LoadEngine("stories260K.gguf");
  ASSERT_TRUE(e);
  const int chunk = 200, budget = 160;
  const std::vector<int> t = Tokens(500, 21);
  const int L = e->impl().config().n_layer, H = e->impl().config().n_head_kv;
  auto opts = [&policy](int c) {
    SessionOptions so;
    so.kv.policy = policy;
    so.kv.budget_tokens = budget;
    so.kv.quant = "f16";
    so.kv.prefill_chunk = c;
    so.ubatch = 64;
    return so;
  };
  auto run = [&](const SessionOptions& so, const std::vector<int>& tokens) {
    auto s = Session::Create(*e, so);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
    EXPECT_TRUE(s.value()->Prefill(tokens).ok());
    EXPECT_TRUE(s.value()->Compress().ok());
    return std::move(s.value());
  };
  auto one = run(opts(0), t);
  for (int c : {500, 4096}) ExpectSameCache(one->impl().cache(), run(opts(c), t)->impl().cache(), policy + " chunk " + std::to_string(c));
  std::vector<KvCache> after;
  std::vector<std::vector<int>> shares;
  SessionOptions so = opts(chunk);
  Session* ses = nullptr;
  so.on_chunk = [&](int64_t, int64_t) {
    const KvCache& cache = ses->impl().cache();
    const std::vector<int>& share = ses->impl().compressor().shared_counts();
    ASSERT_EQ(share.size(), static_cast<size_t>(L * H));
    int held = 0;
    for (int l = 0; l < L; ++l)
      for (int h = 0; h < H; ++h) {
        EXPECT_LE(cache.head(l, h).size(), share[l * H + h]) << "layer " << l << " head " << h;
        held += cache.head(l, h).size();
      }
    EXPECT_EQ(held, budget * L * H);  // the whole prompt's total, spread as the scores say
    after.push_back(cache);
    shares.push_back(share);
  };
  auto ch = Session::Create(*e, so);
  ASSERT_TRUE(ch.ok()) << ch.error().message;
  ses = ch.value().get();
  ASSERT_TRUE(ch.value()->Prefill(t).ok());
  ASSERT_EQ(after.size(), 2u);
  ExpectSameCache(run(opts(0), {t.begin(), t.begin() + chunk})->impl().cache(), after[0], policy + " after the first chunk");
  ASSERT_TRUE(ch.value()->Compress().ok());
  shares.push_back(ch.value()->impl().compressor().shared_counts());
  const KvCache& end = ch.value()->impl().cache();
  int held = 0, from_last = 0;
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) {
      held += end.head(l, h).size();
      for (int i = 0; i < end.head(l, h).size(); ++i) from_last += end.head(l, h).pos(i) >= 2 * chunk;
    }
  EXPECT_EQ(held, budget * L * H);
  EXPECT_GT(from_last, 0);
  EXPECT_NE(shares[0], shares[1]) << "the heads' shares never moved";
  EXPECT_NE(shares[1], shares[2]) << "the heads' shares never moved";
}

TEST(KvzipStream, SharedBudgetStreamsWithChunkedReconstruction) { SharedBudgetStreams("kvzip"); }
TEST(KvzipStream, KvzipPlusSharedBudgetStreamsWithChunkedReconstruction) { SharedBudgetStreams("kvzip+"); }

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::kv
