// KVzip (docs/policies-2.md): the shared top-k against brute force and by
// hand, the policy on hand-made statistics, then the reconstruction pass on
// the needle model (one budget over every head, fixed shares with
// --kvzip-per-head, a repeated block).
#include "engine/engine_impl.h"
#include "kv/budget.h"
#include "kvtrim/clock.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <tuple>

#include "kv/cache.h"
#include "kv/compressor.h"
#include "kv/policy.h"
#include "kv/policies/policies.h"
#include "kv/stats.h"
#include "kv/taps/max_prob.h"
#include "kvtrim/engine.h"
#include "model/config.h"
#include "model/transformer.h"
#include "io/tokenizer.h"
#include "global_top.h"
#include "test_util.h"

namespace kvtrim::kv {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

// The reconstruction scores as a registry tap: the max over the tile's
// queries and group heads, kept aligned by evictions (kept entries) and
// merges (the largest source), by hand.
TEST(MaxProbTap, MaxOverQueriesAlignedByHand) {
  const TapInfo* info = FindTap(kMaxProbTap);
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->last_queries, 0);  // reads every query
  // 2 queries x 2 group heads over 3 entries, causal from entry 1 (query 0 sees 2).
  const std::vector<float> p = {0.6f, 0.4f, 0.f, 0.1f, 0.9f, 0.f,   // query 0, g = 0, 1
                                0.2f, 0.3f, 0.5f, 0.7f, 0.1f, 0.2f};  // query 1
  ProbTile tile;
  tile.t0 = 0, tile.t1 = 2, tile.G = 2, tile.j0 = 0, tile.j1 = 3, tile.n_visible0 = 1, tile.n = 3;
  tile.p = p.data(), tile.ld = 3;
  auto s = info->make({2, 4});
  s->OnTile(tile, {10, 11, -1});
  const auto* m = dynamic_cast<const MaxProbStat*>(s.get());
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->values(), (std::vector<float>{0.7f, 0.9f, 0.5f}));
  s->Rebuild({{0, 2}, {1}});  // entry 0 = merge of old 0 and 2
  EXPECT_EQ(m->values(), (std::vector<float>{0.7f, 0.9f}));
  s->Retain({1, 2});  // entry 2 is new: 0
  EXPECT_EQ(m->values(), (std::vector<float>{0.9f, 0.f}));
}

TEST(KvzipNumerics, SharedTopKByHand) {
  const std::vector<std::vector<double>> s = {{0.9, 0.1, 0.5}, {0.8, 0.7, 0.6}, {0.05}};
  EXPECT_EQ(budget::SharedTopK(s, 3, 0), (std::vector<int>{1, 2, 0}));
  // Floor 1: every head its best first (0.9, 0.8, 0.05), then 0.7 and 0.6.
  EXPECT_EQ(budget::SharedTopK(s, 5, 1), (std::vector<int>{1, 3, 1}));
  // Floors beyond the total: the floors stand.
  EXPECT_EQ(budget::SharedTopK(s, 2, 1), (std::vector<int>{1, 1, 1}));
  // More than every entry: all of them.
  EXPECT_EQ(budget::SharedTopK(s, 100, 0), (std::vector<int>{3, 3, 1}));
}

TEST(KvzipNumerics, SharedTopKIsTheGlobalTopK) {
  std::mt19937 g(3);
  std::uniform_int_distribution<int> len(1, 40), q(0, 9);  // coarse scores: many ties
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<std::vector<double>> s(7);
    std::vector<std::tuple<double, int, int>> all;  // (score, index, head)
    for (int h = 0; h < 7; ++h) {
      s[h].resize(len(g));
      for (size_t i = 0; i < s[h].size(); ++i) all.emplace_back(s[h][i] = q(g) * 0.1, static_cast<int>(i), h);
    }
    std::sort(all.rbegin(), all.rend());  // score, then index, then head, all descending
    const int total = static_cast<int>(all.size()) / 3;
    std::vector<int> want(7, 0);
    for (int i = 0; i < total; ++i) ++want[std::get<2>(all[i])];
    const std::vector<int> got = budget::SharedTopK(s, total, 0);
    EXPECT_EQ(got, want) << trial;
    EXPECT_EQ(std::accumulate(got.begin(), got.end(), 0), total);
  }
}

HeadStore MakeHead(int n, int d = 4) {
  HeadStore h(d, GgmlType::F32);
  std::vector<float> z(d, 0.f);
  for (int i = 0; i < n; ++i) h.Append(z.data(), z.data(), i, 0.f);
  return h;
}

TEST(KvzipPolicy, SharesOneBudgetOverHandMadeHeads) {
  // 2 layers x 2 heads of 6 entries at r = 1/3: 2 per head uniformly, 8 in all.
  KvCache cache(2, 2, 4);
  StatsNeeds needs;
  AttentionStats stats(2, 2, 1, 4, needs);
  const std::vector<std::vector<float>> mp = {
      {0.9f, 0.8f, 0.7f, 0.6f, 0.5f, 0.4f},   // (0, 0): a head the reconstruction leans on
      {0.1f, 0.0f, 0.0f, 0.0f, 0.0f, 0.05f},  // (0, 1)
      {0.3f, 0.2f, 0.65f, 0.0f, 0.0f, 0.0f},  // (1, 0)
      {0.0f, 0.0f, 0.0f, 0.0f, 0.55f, 0.0f}}; // (1, 1)
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < 2; ++h) {
      cache.head(l, h) = MakeHead(6);
      stats.head(l, h).reference.Add(kMaxProbTap, std::make_unique<MaxProbStat>(mp[l * 2 + h]));
    }
  // Through the Compressor: the policy's Score under the shared allocator.
  auto run = [&](const Params& p) {
    KvOptions o;
    o.policy = "kvzip", o.ratio = 1.0 / 3, o.ratio_explicit = true, o.params = p;
    auto c = Compressor::Create(o, 2, 2, 1, 4);
    EXPECT_TRUE(c.ok());
    for (int l = 0; l < 2; ++l)
      for (int h = 0; h < 2; ++h)
        c.value()->stats().head(l, h).reference.Add(kMaxProbTap, std::make_unique<MaxProbStat>(mp[l * 2 + h]));
    KvCache cc = cache;
    cc.AdvanceLogical(6);
    EXPECT_TRUE(c.value()->CompressPrefill(cc).ok());
    std::vector<int> sizes;
    for (int l = 0; l < 2; ++l)
      for (int h = 0; h < 2; ++h) sizes.push_back(cc.head(l, h).size());
    return std::make_pair(sizes, c.value()->counters());
  };
  // The plain ranking (no pooling, no floor share): floor 1 each (0.9, 0.1,
  // 0.65, 0.55), then the 4 best of the rest: 0.8, 0.7, 0.6, 0.5.
  auto [sizes, counters] = run(test::kKvzipPlain);
  EXPECT_EQ(sizes, (std::vector<int>{5, 1, 1, 1}));
  EXPECT_EQ(counters, (std::vector<std::pair<std::string, int64_t>>{{"head-min", 1}, {"head-max", 5}}));
  // --kvzip-floor-share: at least ceil(share x 2) each before the shared
  // top-k; 1 is the uniform share, 0.5 (one entry) the default floor.
  EXPECT_EQ(run({{"kvzip-floor-share", 1}}).first, (std::vector<int>{2, 2, 2, 2}));
  EXPECT_EQ(run({{"kvzip-pool", 1}, {"kvzip-floor-share", 0.5}}).first, (std::vector<int>{5, 1, 1, 1}));
  // kvzip's defaults (pooling over 3, floor share 0.25: one entry here):
  // pooled (0, 0) 0.9 0.9 0.8 0.7 0.6 0.5, (0, 1) 0.1 0.1 0 0 0.05 0.05,
  // (1, 0) 0.3 0.65 0.65 0.65 0 0, (1, 1) 0 0 0 0.55 0.55 0.55; the floor's
  // best of each, then 0.9, 0.8, 0.7 of (0, 0) and a 0.65 of (1, 0).
  EXPECT_EQ(run({}).first, (std::vector<int>{4, 1, 2, 1}));
  auto pol = MakePolicy("kvzip", test::kKvzipPlain);
  ASSERT_TRUE(pol.ok());
  PolicyContext ctx;
  ctx.store = &cache.head(1, 0);
  ctx.stats = &stats.head(1, 0);
  ctx.budget = 1;
  EXPECT_EQ(pol.value()->Compress(ctx).keep, (std::vector<int>{2}));
  ctx.store = &cache.head(0, 0);
  ctx.stats = &stats.head(0, 0);
  ctx.budget = 5;
  EXPECT_EQ(pol.value()->Compress(ctx).keep, (std::vector<int>{0, 1, 2, 3, 4}));
  // --kvzip-per-head: the uniform share, no spread to report.
  auto [fixed, fixed_counters] = run({{"kvzip-per-head", 1}});
  EXPECT_EQ(fixed, (std::vector<int>{2, 2, 2, 2}));
  EXPECT_TRUE(fixed_counters.empty());
}

// --kvzip-pool K: each entry ranked by the largest score within K / 2
// positions of its own (positions, not store slots: a gap left by an
// earlier eviction is not bridged); the carried scores stay unpooled.
TEST(KvzipPolicy, MaxPoolRanksEachEntryByItsNeighbours) {
  HeadStore hs(4, GgmlType::F32);
  const std::vector<float> z(4, 0.f);
  for (int p : {0, 1, 2, 5, 6, 9}) hs.Append(z.data(), z.data(), p, 0.f);
  const std::vector<double> s = {0.1, 0.0, 0.2, 0.9, 0.0, 0.3};
  EXPECT_EQ(MaxPoolByPosition(hs, s, 1), s);
  // half 1: 0 <- {0, 1}; 1 <- {0, 1, 2}; 2 <- {1, 2}; 5 <- {5, 6}; 6 <- {5, 6}; 9 alone
  EXPECT_EQ(MaxPoolByPosition(hs, s, 3), (std::vector<double>{0.1, 0.2, 0.2, 0.9, 0.9, 0.3}));
  // half 3: 2 reaches 5, 9 reaches 6 (0.0) but not 5; 0 and 1 stop before 5
  EXPECT_EQ(MaxPoolByPosition(hs, s, 7), (std::vector<double>{0.2, 0.2, 0.9, 0.9, 0.9, 0.3}));
  // The policy: with kernel 3 the budget of 2 keeps the 0.9 entry and its
  // neighbour (6), not the unpooled runner-up (9, 0.3).
  KvCache cache(1, 1, 4);
  cache.head(0, 0) = hs;
  AttentionStats stats(1, 1, 1, 4, StatsNeeds{});
  stats.head(0, 0).reference.Add(kMaxProbTap, std::make_unique<MaxProbStat>(std::vector<float>(s.begin(), s.end())));
  PolicyContext ctx;
  ctx.store = &cache.head(0, 0);
  ctx.stats = &stats.head(0, 0);
  ctx.budget = 2;
  auto plain = MakePolicy("kvzip", {{"kvzip-per-head", 1}, {"kvzip-pool", 1}});
  auto pooled = MakePolicy("kvzip", {{"kvzip-per-head", 1}});  // kvzip's default kernel: 3
  ASSERT_TRUE(plain.ok() && pooled.ok());
  EXPECT_EQ(plain.value()->Compress(ctx).keep, (std::vector<int>{3, 5}));
  EXPECT_EQ(pooled.value()->Compress(ctx).keep, (std::vector<int>{3, 4}));
  // An even kernel is refused.
  EXPECT_FALSE(MakePolicy("kvzip", {{"kvzip-pool", 4}}).ok());
}


// BOS, then `copies` copies of a block of K ordinary token ids (seeded).
std::vector<int> RepeatedBlock(const io::Tokenizer& tok, int K, int copies, uint32_t seed) {
  std::vector<int> ordinary;
  for (int id = 0; id < tok.vocab_size(); ++id)
    if (tok.type(id) == io::TokenType::kNormal && id != tok.bos() && id != tok.eos()) ordinary.push_back(id);
  std::mt19937 g(seed);
  std::vector<int> block(K), seq{tok.bos()};
  for (int& id : block) id = ordinary[g() % ordinary.size()];
  for (int c = 0; c < copies; ++c) seq.insert(seq.end(), block.begin(), block.end());
  return seq;
}

std::unique_ptr<Session> Compressed(const Engine& e, const KvOptions& kv, const std::vector<int>& toks) {
  SessionOptions so;
  so.kv = kv;
  auto s = Session::Create(e, so);
  EXPECT_TRUE(s.ok());
  EXPECT_TRUE(s.value()->Prefill(toks).ok());
  EXPECT_TRUE(s.value()->Compress().ok());
  return std::move(s.value());
}

// An independent record of the reconstruction's attention: every
// probability row of every query head, reduced here (max over queries and
// group heads) over the entries the cache held before the pass.
class MaxTap : public AttentionTap {
 public:
  MaxTap(int L, int H, int n) : m_(static_cast<size_t>(L) * H, std::vector<double>(n, 0.0)), H_(H) {}
  bool WantsProbs(int) const override { return true; }
  void OnProbTile(int layer, int h, const ProbTile& tile) override {
    std::vector<double>& m = m_[static_cast<size_t>(layer) * H_ + h];
    for (int t = tile.t0; t < tile.t1; ++t)
      for (int g = 0; g < tile.G; ++g)
        for (int j = tile.j0; j < tile.j1 && j < static_cast<int>(m.size()); ++j)
          m[j] = std::max(m[j], static_cast<double>(tile.Row(t, g)[j - tile.j0]));
  }
  std::vector<std::vector<double>> m_;
  int H_;
};

// Per head (l * n_head_kv + h), the positions a cache holds, in store order.
std::vector<std::vector<int>> HeldPositions(const KvCache& c) {
  std::vector<std::vector<int>> out;
  for (int l = 0; l < c.n_layer(); ++l)
    for (int h = 0; h < c.n_head_kv(); ++h) {
      const HeadStore& hs = c.head(l, h);
      out.emplace_back();
      for (int i = 0; i < hs.size(); ++i) out.back().push_back(hs.pos(i));
    }
  return out;
}

TEST(KvzipEndToEnd, KeepsTheGlobalTopOfTheReconstructionsAttention) {
  auto e = test::LoadEngine("needle-v1-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  const auto& c = e->impl().config();
  const int K = 24, L = c.n_layer, H = c.n_head_kv;
  const std::vector<int> toks = RepeatedBlock(e->impl().tokenizer(), K, 3, 5);  // BOS + 3 copies of one block
  const int n = static_cast<int>(toks.size());
  const double r = 0.25;
  KvOptions kv;
  kv.policy = "kvzip";
  kv.ratio = r;
  kv.params = test::kKvzipPlain;
  kv.bf16_attention = "off";  // the pass in f32, as the reconstruction by hand below
  auto s = Compressed(*e, kv, toks);

  // The reconstruction by hand: a fresh prefill, then the instruction and
  // the context again (BOS dropped) over the full cache.
  SessionOptions so;
  auto full = Session::Create(*e, so);
  ASSERT_TRUE(full.ok());
  ASSERT_TRUE(full.value()->Prefill(toks).ok());
  KvCache copy2(full.value()->impl().cache());
  MaxTap tap2(L, H, n);  // the reconstruction's queries only (not the instruction's)
  std::vector<float> logits;
  std::vector<int> instr = e->impl().tokenizer().Encode("\nRepeat the previous context:\n", false);
  ASSERT_TRUE(e->impl().transformer().Forward(e->impl().pool(), copy2, instr.data(), static_cast<int>(instr.size()), false, &logits).ok());
  ASSERT_TRUE(e->impl().transformer().Forward(e->impl().pool(), copy2, toks.data() + 1, n - 1, false, &logits, &tap2).ok());

  // By a full sort over every (layer, head, entry): each head's best entry
  // (the floor of 1), then the best of the rest up to the uniform total.
  const int total = L * H * static_cast<int>(std::ceil(r * n));
  std::vector<std::vector<int>> want = test::GlobalTopWithFloor(tap2.m_, total);
  const std::vector<std::vector<int>> got = HeldPositions(s->impl().cache());
  int held = 0, smallest = n, largest = 0;
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) {
      EXPECT_EQ(got[l * H + h], want[l * H + h]) << "layer " << l << " head " << h;
      const int size = static_cast<int>(got[l * H + h].size());
      held += size, smallest = std::min(smallest, size), largest = std::max(largest, size);
    }
  // The pass in bf16 (the default where the CPU has it) keeps nearly the
  // same entries: its scores differ from f32's by bf16's rounding only.
  kv.bf16_attention = "pass";
  const std::vector<std::vector<int>> b16 = HeldPositions(Compressed(*e, kv, toks)->impl().cache());
  int same = 0, kept = 0;
  for (int f = 0; f < L * H; ++f) {
    std::vector<int> both;
    std::set_intersection(b16[f].begin(), b16[f].end(), want[f].begin(), want[f].end(), std::back_inserter(both));
    same += static_cast<int>(both.size()), kept += static_cast<int>(want[f].size());
  }
  EXPECT_GE(same, 0.95 * kept) << same << " of " << kept;
  // One budget over every head: the uniform total, shares that differ.
  EXPECT_EQ(held, total);
  EXPECT_LT(smallest, largest);
  // The pass's time is reported against the prefill's.
  std::map<std::string, int64_t> ctr;
  for (const auto& [k, v] : s->impl().compressor().counters()) ctr[k] = v;
  // Present and never negative; a short pass may read 0 on a clock that
  // ticks in 20 ms steps (io/clock.h), and is then marked below resolution.
  ASSERT_TRUE(ctr.count("ref-pass-us") && ctr.count("prefill-us"));
  EXPECT_GE(ctr["ref-pass-us"], 0);
  EXPECT_GE(ctr["prefill-us"], 0);
  const int64_t min_us = SteadyClock().Span() / 1000;
  EXPECT_EQ(ctr.count("timing-below-clock-res"), (ctr["ref-pass-us"] < min_us || ctr["prefill-us"] < min_us) ? 1u : 0u);
  EXPECT_EQ(ctr["head-max"], largest);
  EXPECT_EQ(ctr["head-min"], smallest);

  // --kvzip-per-head: every head its uniform share.
  kv.params = {{"kvzip-per-head", 1}};
  auto fixed = Compressed(*e, kv, toks);
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) EXPECT_EQ(fixed->impl().cache().head(l, h).size(), static_cast<int>(std::ceil(r * n)));
}

// --kvzip-pass-chunk P: the reconstruction repeats P tokens at a time, each
// chunk over its own copy of the full cache and the instruction (KVzip's
// chunked scoring). By hand: each chunk's repeat on a fresh copy, the max
// over the chunks, the same global top-k.
// The reference pass runs without logits (Transformer::Forward with none
// stops the last layer after its attention): the keys and values it appends
// and the probabilities its taps see are those of a forward with logits.
TEST(KvzipEndToEnd, APassWithoutLogitsAppendsAndTapsTheSame) {
  auto e = test::LoadEngine("needle-v1-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  const auto& c = e->impl().config();
  const std::vector<int> toks = RepeatedBlock(e->impl().tokenizer(), 24, 3, 5);
  const int n = static_cast<int>(toks.size());
  auto full = Session::Create(*e, SessionOptions{});
  ASSERT_TRUE(full.ok());
  ASSERT_TRUE(full.value()->Prefill({toks.begin(), toks.begin() + n / 2}).ok());
  KvCache with(full.value()->impl().cache()), without(full.value()->impl().cache());
  MaxTap tap_with(c.n_layer, c.n_head_kv, n), tap_without(c.n_layer, c.n_head_kv, n);
  std::vector<float> logits;
  const auto& tf = e->impl().transformer();
  ASSERT_TRUE(tf.Forward(e->impl().pool(), with, toks.data() + n / 2, n - n / 2, false, &logits, &tap_with).ok());
  ASSERT_TRUE(tf.Forward(e->impl().pool(), without, toks.data() + n / 2, n - n / 2, false, nullptr, &tap_without).ok());
  EXPECT_EQ(logits.size(), static_cast<size_t>(c.vocab));
  EXPECT_EQ(with.logical_length(), without.logical_length());
  for (int l = 0; l < c.n_layer; ++l)
    for (int h = 0; h < c.n_head_kv; ++h) {
      const HeadStore &a = with.head(l, h), &b = without.head(l, h);
      ASSERT_EQ(a.size(), n) << l << " " << h;
      ASSERT_EQ(b.size(), n) << l << " " << h;
      for (int i = 0; i < n; ++i) {
        ASSERT_EQ(std::memcmp(a.key_row(i), b.key_row(i), a.row_bytes()), 0) << l << " " << h << " " << i;
        ASSERT_EQ(std::memcmp(a.value_row(i), b.value_row(i), a.row_bytes()), 0) << l << " " << h << " " << i;
      }
    }
  EXPECT_EQ(tap_with.m_, tap_without.m_);
}

TEST(KvzipEndToEnd, ChunkedScoringRepeatsEachChunkOverItsOwnCopy) {
  auto e = test::LoadEngine("needle-v1-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  const auto& c = e->impl().config();
  const int K = 24, L = c.n_layer, H = c.n_head_kv, P = 20;
  const std::vector<int> toks = RepeatedBlock(e->impl().tokenizer(), K, 3, 5);
  const int n = static_cast<int>(toks.size());
  ASSERT_GT(n - 1, 2 * P);  // three chunks, the last one short
  const double r = 0.25;
  KvOptions kv;
  kv.policy = "kvzip";
  kv.ratio = r;
  kv.params = test::kKvzipPlain;
  kv.params["kvzip-pass-chunk"] = P;
  auto s = Compressed(*e, kv, toks);

  SessionOptions so;
  auto full = Session::Create(*e, so);
  ASSERT_TRUE(full.ok());
  ASSERT_TRUE(full.value()->Prefill(toks).ok());
  KvCache base(full.value()->impl().cache());
  std::vector<float> logits;
  std::vector<int> instr = e->impl().tokenizer().Encode("\nRepeat the previous context:\n", false);
  ASSERT_TRUE(e->impl().transformer().Forward(e->impl().pool(), base, instr.data(), static_cast<int>(instr.size()), false, &logits).ok());
  MaxTap tap(L, H, n);
  for (int i = 1; i < n; i += P) {
    KvCache copy(base);
    const int m = std::min(P, n - i);
    ASSERT_TRUE(e->impl().transformer().Forward(e->impl().pool(), copy, toks.data() + i, m, false, &logits, &tap).ok());
  }
  const std::vector<std::vector<int>> want = test::GlobalTopWithFloor(tap.m_, L * H * static_cast<int>(std::ceil(r * n)));
  const std::vector<std::vector<int>> got = HeldPositions(s->impl().cache());
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) EXPECT_EQ(got[l * H + h], want[l * H + h]) << "layer " << l << " head " << h;
  // A chunk as long as the repeat: the whole-range pass (0), entry for entry.
  kv.params = {{"kvzip-pass-chunk", n}};
  auto whole = Compressed(*e, kv, toks);
  kv.params = {{"kvzip-pass-chunk", 0}};
  auto dflt = Compressed(*e, kv, toks);
  EXPECT_EQ(HeldPositions(whole->impl().cache()), HeldPositions(dflt->impl().cache()));
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::kv
