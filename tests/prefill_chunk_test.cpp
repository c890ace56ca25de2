// Chunked prefill that compresses as it goes (KvOptions::prefill_chunk,
// issue 30): a chunk at least the prompt's length is the one-shot prefill
// bit for bit for every policy that streams; with smaller chunks no head
// ever holds more than its budget + one chunk; each policy's statistics are
// carried across chunks as its seed does for long inputs (hand-computed
// cases on a one-head cache); every built-in prefill-time policy streams.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "engine/engine_impl.h"
#include "one_head.h"
#include "tap_values.h"
#include "kv/cache.h"
#include "kv/compressor.h"
#include "kv/policy.h"
#include "kvtrim/engine.h"
#include "test_util.h"

namespace kvtrim {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

std::vector<int> Tokens(int n, unsigned seed = 5) {
  std::mt19937 rng(seed);
  std::vector<int> t(n);
  t[0] = 1;  // BOS
  for (int i = 1; i < n; ++i) t[i] = 3 + static_cast<int>(rng() % 500);
  return t;
}

// Every built-in prefill-time policy of the registry, and why it cannot
// stream (empty: it can). The policies toy_policy_test registers in the same
// process ("toy-") are left out.
std::vector<std::pair<std::string, std::string>> PrefillTimePolicies() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const kv::PolicyInfo& info : kv::Registry()) {
    if (info.name.rfind("toy-", 0) == 0) continue;
    auto p = kv::MakePolicy(info.name, {});
    if (p.ok() && p.value()->traits().prefill_time) out.emplace_back(info.name, StreamBlocker(p.value()->traits()));
  }
  return out;
}

void ExpectSameCache(const kv::KvCache& a, const kv::KvCache& b, const std::string& what) {
  ASSERT_EQ(a.logical_length(), b.logical_length()) << what;
  for (int l = 0; l < a.n_layer(); ++l)
    for (int h = 0; h < a.n_head_kv(); ++h) {
      const kv::HeadStore &x = a.head(l, h), &y = b.head(l, h);
      ASSERT_EQ(x.size(), y.size()) << what << " layer " << l << " head " << h;
      ASSERT_EQ(x.type(), y.type()) << what;
      for (int i = 0; i < x.size(); ++i) {
        ASSERT_EQ(x.pos(i), y.pos(i)) << what << " layer " << l << " head " << h << " entry " << i;
        const float bx = x.logw(i), by = y.logw(i);
        ASSERT_EQ(std::memcmp(&bx, &by, sizeof(float)), 0) << what << " log-weight " << i;
        ASSERT_EQ(std::memcmp(x.key_row(i), y.key_row(i), x.row_bytes()), 0) << what << " key " << i;
        ASSERT_EQ(std::memcmp(x.value_row(i), y.value_row(i), x.row_bytes()), 0) << what << " value " << i;
      }
    }
}

// razor keeps its retrieval heads whole (a quarter of stories260K's KV
// heads): it reaches no lower ratio than about 0.42 at 300 tokens.
double RatioFor(const std::string& policy, double r) { return policy == "razor" ? 0.5 : r; }

// f16 entries at the asked ratio (razor's own), prefilled in chunks of `chunk`.
SessionOptions ChunkOptions(const std::string& policy, double ratio, int chunk, int ubatch) {
  SessionOptions so;
  so.kv.policy = policy;
  so.kv.ratio = RatioFor(policy, ratio);
  so.kv.ratio_explicit = true;
  so.kv.quant = "f16";
  so.kv.prefill_chunk = chunk;
  so.ubatch = ubatch;
  return so;
}

std::unique_ptr<Session> Compressed(const Engine& e, const std::string& policy, int chunk, const std::vector<int>& t,
                                    std::function<void(int64_t, int64_t)> on_chunk = {}) {
  SessionOptions so = ChunkOptions(policy, 0.25, chunk, 64);
  so.on_chunk = std::move(on_chunk);
  auto s = Session::Create(e, so);
  EXPECT_TRUE(s.ok()) << policy << ": " << (s.ok() ? "" : s.error().message);
  if (!s.ok()) return nullptr;
  Status st = s.value()->Prefill(t);
  EXPECT_TRUE(st.ok()) << policy << ": " << st.message();
  st = s.value()->Compress();
  EXPECT_TRUE(st.ok()) << policy << ": " << st.message();
  return std::move(s.value());
}

TEST(PrefillChunk, ChunkAtLeastThePromptIsTheOneShotPrefillBitForBit) {
  auto e = test::LoadEngine("stories260K.gguf");
  ASSERT_TRUE(e);
  const std::vector<int> t = Tokens(300);
  int streaming = 0;
  for (const auto& [policy, why] : PrefillTimePolicies()) {
    if (!why.empty()) continue;
    ++streaming;
    auto one = Compressed(*e, policy, 0, t);
    ASSERT_TRUE(one);
    EXPECT_LT(one->impl().cache().EntriesHeld(), static_cast<size_t>(300 * 5 * 4)) << policy << " compressed nothing";
    for (int chunk : {300, 301, 4096}) {
      auto ch = Compressed(*e, policy, chunk, t);
      ASSERT_TRUE(ch);
      ExpectSameCache(one->impl().cache(), ch->impl().cache(), policy + " chunk " + std::to_string(chunk));
      ASSERT_EQ(one->logits(), ch->logits()) << policy;
    }
  }
  EXPECT_GE(streaming, 15);  // every eviction, merging and scoring policy, am, kvzip and kvzip+
}

TEST(PrefillChunk, PoliciesThatCannotStreamRefuseTheFlag) {
  auto e = test::LoadEngine("stories260K.gguf");
  ASSERT_TRUE(e);
  int refused = 0;
  for (const auto& [policy, why] : PrefillTimePolicies()) {
    if (why.empty()) continue;
    ++refused;
    SessionOptions so;
    so.kv.policy = policy;
    so.kv.ratio = 0.25;
    so.kv.prefill_chunk = 64;
    auto s = Session::Create(*e, so);
    ASSERT_FALSE(s.ok()) << policy;
    EXPECT_NE(s.error().message.find("--prefill-chunk: policy '" + policy + "' cannot"), std::string::npos)
        << s.error().message;
    so.kv.prefill_chunk = 0;  // without the flag it runs
    EXPECT_TRUE(Session::Create(*e, so).ok()) << policy;
  }
  EXPECT_EQ(refused, 0);  // every built-in policy streams (a policy refused by its traits: toy_policy_test)
  SessionOptions so;
  so.kv.prefill_chunk = -1;
  EXPECT_FALSE(Session::Create(*e, so).ok());
}

// A 4k-token prompt in chunks of 512: after every chunk each head is within
// its budget for the whole prompt (so it never held more than budget + 512),
// and the peak KV stays well under the one-shot prefill's.
TEST(PrefillChunk, NoHeadEverHoldsMoreThanItsBudgetPlusAChunk) {
  auto e = Engine::Load({test::ModelPath("stories260K.gguf"), 2, {}, 4096});
  ASSERT_TRUE(e.ok()) << e.error().message;
  const int n = 4000, chunk = 512;
  const std::vector<int> t = Tokens(n, 9);
  auto full = Compressed(*e.value(), "full", 0, t);
  ASSERT_TRUE(full);
  for (const auto& [policy, why] : PrefillTimePolicies()) {
    if (!why.empty()) continue;
    Session* ses = nullptr;
    int calls = 0;
    auto check = [&](int64_t done, int64_t total) {
      ++calls;
      ASSERT_EQ(total, n);
      ASSERT_EQ(done, static_cast<int64_t>(calls) * chunk);
      ASSERT_NE(ses, nullptr);
      const std::vector<int> b = ses->impl().compressor().HeadBudgets(n);
      for (int l = 0; l < ses->impl().cache().n_layer(); ++l)
        for (int h = 0; h < ses->impl().cache().n_head_kv(); ++h)
          ASSERT_LE(ses->impl().cache().head(l, h).size(), b[static_cast<size_t>(l) * ses->impl().cache().n_head_kv() + h])
              << policy << " after " << done << " tokens, layer " << l << " head " << h;
    };
    SessionOptions so = ChunkOptions(policy, 0.1, chunk, 128);
    so.on_chunk = check;
    auto s = Session::Create(*e.value(), so);
    ASSERT_TRUE(s.ok()) << s.error().message;
    ses = s.value().get();
    Status st = s.value()->Prefill(t);
    ASSERT_TRUE(st.ok()) << policy << ": " << st.message();
    EXPECT_EQ(calls, (n - 1) / chunk) << policy;  // every chunk but the last
    ASSERT_TRUE(s.value()->Compress().ok()) << policy;
    // Budget (about 400 per head; razor 2000) + a chunk, against 4000 per
    // head; a reference pass (am's repeat) runs on a copy of the compressed
    // past and the chunk, with the chunk repeated: budget + 3 chunks at most.
    const double factor = policy == "razor" ? 1.2 : s.value()->impl().compressor().policy().traits().reference_pass.repeat ? 1.5 : 3.0;
    EXPECT_LT(s.value()->peak_kv_bytes() * factor, full->peak_kv_bytes()) << policy;
    EXPECT_EQ(s.value()->position(), n);
  }
}

// The first chunk's compression is the seed's one-shot compression of that
// chunk alone (same token budget): every streaming policy scores it from
// the same statistics. razor is left out: its window follows the whole
// prompt's length; am too: it compacts each chunk to its share of the
// budget, not to the whole budget (its own test below). After the second chunk, Compactor's carried scores let
// the second chunk's entries compete with the first's (protecting the first
// chunk's entries instead would keep all of them and none of the second's).
TEST(PrefillChunk, TheFirstChunkIsCompressedAsAOneShotPrefillOfIt) {
  auto e = test::LoadEngine("stories260K.gguf");
  ASSERT_TRUE(e);
  const int chunk = 200, budget = 160;
  const std::vector<int> t = Tokens(500, 21);
  const std::vector<int> first(t.begin(), t.begin() + chunk);
  for (const auto& [policy, why] : PrefillTimePolicies()) {
    if (!why.empty() || policy == "razor" || policy == "am") continue;
    std::vector<kv::KvCache> after;
    SessionOptions so;
    so.kv.policy = policy;
    so.kv.budget_tokens = budget;
    if (policy == "pyramidkv") so.kv.params["obs-window"] = 4;  // its top layer keeps 8 of 160
    so.kv.quant = "f16";
    so.ubatch = 64;
    so.kv.prefill_chunk = chunk;
    Session* ses = nullptr;
    so.on_chunk = [&](int64_t, int64_t) { after.push_back(ses->impl().cache()); };
    auto ch = Session::Create(*e, so);
    ASSERT_TRUE(ch.ok()) << ch.error().message;
    ses = ch.value().get();
    ASSERT_TRUE(ch.value()->Prefill(t).ok()) << policy;
    ASSERT_EQ(after.size(), 2u);
    so.kv.prefill_chunk = 0;
    so.on_chunk = nullptr;
    auto one = Session::Create(*e, so);
    ASSERT_TRUE(one.ok());
    ASSERT_TRUE(one.value()->Prefill(first).ok());
    ASSERT_TRUE(one.value()->Compress().ok());
    ExpectSameCache(one.value()->impl().cache(), after[0], policy + " after the first chunk");
    if (policy != "compactor") continue;
    int from_second = 0, first_dropped = 0;
    for (int l = 0; l < after[1].n_layer(); ++l)
      for (int h = 0; h < after[1].n_head_kv(); ++h) {
        const kv::HeadStore& hs = after[1].head(l, h);
        int firsts = 0;
        for (int i = 0; i < hs.size(); ++i) firsts += hs.pos(i) < chunk;
        from_second += hs.size() - firsts;
        first_dropped += budget - firsts;
      }
    EXPECT_GT(from_second, 0);
    EXPECT_GT(first_dropped, 0);
    // The last chunk is compressed by Compress() (no EndChunk): the entries
    // before it compete by their carried scores there too.
    ASSERT_TRUE(ch.value()->Compress().ok());
    int from_last = 0;
    const kv::KvCache& end = ch.value()->impl().cache();
    for (int l = 0; l < end.n_layer(); ++l)
      for (int h = 0; h < end.n_head_kv(); ++h)
        for (int i = 0; i < end.head(l, h).size(); ++i) from_last += end.head(l, h).pos(i) >= 2 * chunk;
    EXPECT_GT(from_last, 0);
  }
}

// KVzip's streaming cases share one setup: stories260K, a 500-token prompt
// in chunks of 200, 160 entries a head, f16, batches of 64.
constexpr int kKvzipChunk = 200, kKvzipBudget = 160;

SessionOptions KvzipOptions(const std::string& policy, bool per_head, int chunk) {
  SessionOptions so;
  so.kv.policy = policy;
  if (per_head) so.kv.params["kvzip-per-head"] = 1;
  so.kv.budget_tokens = kKvzipBudget;
  so.kv.quant = "f16";
  so.kv.prefill_chunk = chunk;
  so.ubatch = 64;
  return so;
}

std::unique_ptr<Session> PrefillAndCompress(const Engine& e, const SessionOptions& so, const std::vector<int>& tokens) {
  auto s = Session::Create(e, so);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  EXPECT_TRUE(s.value()->Prefill(tokens).ok());
  EXPECT_TRUE(s.value()->Compress().ok());
  return std::move(s.value());
}

// KVzip per head streams with chunked reconstruction: a chunk at least the
// prompt is the one-shot bit for bit; the first chunk is compressed exactly
// as a one-shot KVzip of that chunk alone (its pass repeats that chunk
// only, over that chunk); every head is within its budget after each
// chunk; the last chunk's entries compete with the carried ones.
void KvzipPerHeadStreams(const std::string& policy) {
  auto e = test::LoadEngine("stories260K.gguf");
  ASSERT_TRUE(e);
  const int chunk = kKvzipChunk, budget = kKvzipBudget;
  const std::vector<int> t = Tokens(500, 21);
  auto opts = [&policy](int c) { return KvzipOptions(policy, true, c); };
  auto run = [&](const SessionOptions& so, const std::vector<int>& tokens) { return PrefillAndCompress(*e, so, tokens); };
  auto one = run(opts(0), t);
  for (int c : {500, 4096}) ExpectSameCache(one->impl().cache(), run(opts(c), t)->impl().cache(), "kvzip chunk " + std::to_string(c));
  std::vector<kv::KvCache> after;
  SessionOptions so = opts(chunk);
  Session* ses = nullptr;
  so.on_chunk = [&](int64_t, int64_t) {
    after.push_back(ses->impl().cache());
    for (int l = 0; l < ses->impl().cache().n_layer(); ++l)
      for (int h = 0; h < ses->impl().cache().n_head_kv(); ++h) ASSERT_LE(ses->impl().cache().head(l, h).size(), budget);
  };
  auto ch = Session::Create(*e, so);
  ASSERT_TRUE(ch.ok()) << ch.error().message;
  ses = ch.value().get();
  ASSERT_TRUE(ch.value()->Prefill(t).ok());
  ASSERT_EQ(after.size(), 2u);
  ExpectSameCache(run(opts(0), {t.begin(), t.begin() + chunk})->impl().cache(), after[0], "kvzip after the first chunk");
  ASSERT_TRUE(ch.value()->Compress().ok());
  int from_last = 0, from_first = 0;
  const kv::KvCache& end = ch.value()->impl().cache();
  for (int l = 0; l < end.n_layer(); ++l)
    for (int h = 0; h < end.n_head_kv(); ++h)
      for (int i = 0; i < end.head(l, h).size(); ++i) {
        from_last += end.head(l, h).pos(i) >= 2 * chunk;
        from_first += end.head(l, h).pos(i) < chunk;
      }
  EXPECT_GT(from_last, 0);
  EXPECT_GT(from_first, 0);
  bool differs = false;
  for (int l = 0; l < end.n_layer() && !differs; ++l)
    for (int h = 0; h < end.n_head_kv() && !differs; ++h)
      for (int i = 0; i < end.head(l, h).size() && !differs; ++i) differs = end.head(l, h).pos(i) != one->impl().cache().head(l, h).pos(i);
  EXPECT_TRUE(differs) << "chunked reconstruction chose the one-shot's entries everywhere";
}

TEST(PrefillChunk, KvzipPerHeadStreamsWithChunkedReconstruction) { KvzipPerHeadStreams("kvzip"); }
// KVzip+'s hidden norms and output weights reach every chunk's pass.
TEST(PrefillChunk, KvzipPlusPerHeadStreamsWithChunkedReconstruction) { KvzipPerHeadStreams("kvzip+"); }

// KVzip's shared budget streams: a chunk at least the prompt is the one-shot
// bit for bit, the first chunk is the one-shot of that chunk alone, after
// every chunk no head holds more than its share and the entries held are
// the whole prompt's total, and the shares move between chunks (the top-k
// over the carried scores by hand: kvzip_stream_test.cpp).
void KvzipSharedBudgetStreams(const std::string& policy) {
  auto e = test::LoadEngine("stories260K.gguf");
  ASSERT_TRUE(e);
  const int chunk = kKvzipChunk, budget = kKvzipBudget;
  const std::vector<int> t = Tokens(500, 21);
  const int L = e->impl().config().n_layer, H = e->impl().config().n_head_kv;
  auto opts = [&policy](int c) { return KvzipOptions(policy, false, c); };
  auto run = [&](const SessionOptions& so, const std::vector<int>& tokens) { return PrefillAndCompress(*e, so, tokens); };
  auto one = run(opts(0), t);
  for (int c : {500, 4096}) ExpectSameCache(one->impl().cache(), run(opts(c), t)->impl().cache(), policy + " chunk " + std::to_string(c));
  std::vector<kv::KvCache> after;
  std::vector<std::vector<int>> shares;
  SessionOptions so = opts(chunk);
  Session* ses = nullptr;
  so.on_chunk = [&](int64_t, int64_t) {
    const kv::KvCache& cache = ses->impl().cache();
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
  const kv::KvCache& end = ch.value()->impl().cache();
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

TEST(PrefillChunk, KvzipSharedBudgetStreamsWithChunkedReconstruction) { KvzipSharedBudgetStreams("kvzip"); }
TEST(PrefillChunk, KvzipPlusSharedBudgetStreamsWithChunkedReconstruction) { KvzipSharedBudgetStreams("kvzip+"); }

// Attention Matching compacts each chunk to its share of the budget,
// ceil(B c1 / N) - ceil(B c0 / N), with that chunk's reference queries (its
// prefill queries and its repeat pass), and leaves the entries compacted
// with earlier chunks as they are: after the first chunk the cache is a
// one-shot am of that chunk alone at its share; after each later chunk the
// earlier entries are unchanged bit for bit (keys, fitted values and
// log-weights) and every head holds exactly its share so far.
// The cache after each chunk in *after; onpolicy: --am-onpolicy (0 or 2).
void AmCompactsEachChunkToItsShare(const Engine& eng, double onpolicy, std::vector<kv::KvCache>* out) {
  const Engine* e = &eng;
  const int chunk = 200, budget = 160, n = 500;
  const std::vector<int> t = Tokens(n, 21);
  auto opts = [&](int c, int b) {
    SessionOptions so;
    so.kv.policy = "am";
    so.kv.budget_tokens = b;
    so.kv.quant = "f16";
    so.kv.prefill_chunk = c;
    so.kv.params["am-onpolicy"] = onpolicy;
    // The one-shot references below are one block, which --am-min-queries
    // would top up with the prefill's queries (a chunk never is): off, so
    // both sides read the same queries.
    so.kv.params["am-min-queries"] = 0;
    so.ubatch = 64;
    return so;
  };
  std::vector<kv::KvCache>& after = *out;
  SessionOptions so = opts(chunk, budget);
  Session* ses = nullptr;
  so.on_chunk = [&](int64_t, int64_t) { after.push_back(ses->impl().cache()); };
  auto ch = Session::Create(*e, so);
  ASSERT_TRUE(ch.ok()) << ch.error().message;
  ses = ch.value().get();
  ASSERT_TRUE(ch.value()->Prefill(t).ok());
  ASSERT_TRUE(ch.value()->Compress().ok());
  after.push_back(ch.value()->impl().cache());
  ASSERT_EQ(after.size(), 3u);
  const int share[3] = {64, 128, 160};  // ceil(160 * {200, 400, 500} / 500)
  auto one = Session::Create(*e, opts(0, share[0]));
  ASSERT_TRUE(one.ok());
  ASSERT_TRUE(one.value()->Prefill({t.begin(), t.begin() + chunk}).ok());
  ASSERT_TRUE(one.value()->Compress().ok());
  ExpectSameCache(one.value()->impl().cache(), after[0], "am after the first chunk");
  for (int c = 1; c < 3; ++c)
    for (int l = 0; l < after[c].n_layer(); ++l)
      for (int h = 0; h < after[c].n_head_kv(); ++h) {
        const kv::HeadStore &now = after[c].head(l, h), &before = after[c - 1].head(l, h);
        // Its share, but for the keys NNLS gave weight 0 with no candidate
        // left to take their slots (counted: am-dropped, below).
        ASSERT_LE(now.size(), share[c]) << "chunk " << c << " layer " << l << " head " << h;
        ASSERT_GT(now.size(), before.size()) << "chunk " << c << " layer " << l << " head " << h;
        for (int i = 0; i < now.size(); ++i) {
          if (i < before.size()) {
            const float bx = now.logw(i), by = before.logw(i);
            ASSERT_EQ(now.pos(i), before.pos(i));
            ASSERT_EQ(std::memcmp(&bx, &by, sizeof(float)), 0) << "log-weight " << i;
            ASSERT_EQ(std::memcmp(now.key_row(i), before.key_row(i), now.row_bytes()), 0) << "key " << i;
            ASSERT_EQ(std::memcmp(now.value_row(i), before.value_row(i), now.row_bytes()), 0) << "value " << i;
          } else {  // the chunk's own entries
            ASSERT_GE(now.pos(i), c * chunk);
            ASSERT_LT(now.pos(i), std::min(n, (c + 1) * chunk));
          }
        }
      }
  int64_t missing = 0, dropped = -1;
  for (int l = 0; l < after[2].n_layer(); ++l)
    for (int h = 0; h < after[2].n_head_kv(); ++h) missing += share[2] - after[2].head(l, h).size();
  for (const auto& [name, v] : ch.value()->impl().compressor().counters())
    if (name == "am-dropped") dropped = v;
  EXPECT_EQ(missing, dropped);
}

TEST(PrefillChunk, AmCompactsEachChunkToItsShare) {
  auto e = test::LoadEngine("stories260K.gguf");
  ASSERT_TRUE(e);
  std::vector<kv::KvCache> after;
  AmCompactsEachChunkToItsShare(*e, 0, &after);
  SessionOptions onpolicy;
  onpolicy.kv.policy = "am";
  onpolicy.kv.budget_tokens = 160;
  onpolicy.kv.prefill_chunk = 200;
  onpolicy.kv.params["am-onpolicy"] = 1;
  auto refused = Session::Create(*e, onpolicy);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("--am-onpolicy"), std::string::npos) << refused.error().message;
}

// --am-onpolicy 2 (one repeat pass a chunk, each layer compacted as the pass
// reaches it) streams with the same shares and carried entries; layer 0's
// queries see nothing compacted, so it equals the off-policy layer 0 bit for
// bit after every chunk, and a layer above it differs.
TEST(PrefillChunk, AmOnePassOnPolicyStreams) {
  auto e = test::LoadEngine("stories260K.gguf");
  ASSERT_TRUE(e);
  std::vector<kv::KvCache> off, on;
  AmCompactsEachChunkToItsShare(*e, 0, &off);
  AmCompactsEachChunkToItsShare(*e, 2, &on);
  ASSERT_EQ(on.size(), off.size());
  const int L = on[0].n_layer();
  for (size_t c = 0; c < on.size(); ++c) {
    int differ = 0;
    for (int h = 0; h < on[c].n_head_kv(); ++h) {
      const kv::HeadStore &a = on[c].head(0, h), &b = off[c].head(0, h);
      ASSERT_EQ(a.size(), b.size()) << "chunk " << c << " head " << h;
      for (int i = 0; i < a.size(); ++i) {
        const float x = a.logw(i), y = b.logw(i);
        ASSERT_EQ(a.pos(i), b.pos(i));
        ASSERT_EQ(std::memcmp(&x, &y, sizeof(float)), 0) << "chunk " << c << " log-weight " << i;
        ASSERT_EQ(std::memcmp(a.value_row(i), b.value_row(i), a.row_bytes()), 0) << "chunk " << c << " value " << i;
      }
      const kv::HeadStore &p = on[c].head(L - 1, h), &q = off[c].head(L - 1, h);
      differ += p.size() != q.size() || std::memcmp(p.value_row(0), q.value_row(0), p.row_bytes() * p.size()) != 0;
    }
    EXPECT_GT(differ, 0) << "chunk " << c;
  }
}

// --- carried statistics, by hand, on one head of dimension 2 -------------

// The compressor of one head (one_head.h) for `policy` at a token budget.
test::OneHead OneHeadFor(const std::string& policy, int budget, kv::Params params = {}) {
  KvOptions o;
  o.policy = policy;
  o.budget_tokens = budget;
  o.params = std::move(params);
  return test::OneHead(o);
}

// H2O: the accumulated mass goes on with the entries kept (no reset).
TEST(PrefillChunk, H2oCarriesTheAccumulatedMass) {
  test::OneHead o = OneHeadFor("h2o", 3, {{"heavy-ratio", 1.0}, {"sink-guard", 0}});
  o.comp->BeginChunk(4, true);
  o.Chunk(0, {{1.f}, {.2f, .8f}, {.1f, .6f, .3f}, {.1f, .5f, .1f, .3f}});
  // acc = {1.4, 1.9, 0.4, 0.3}: 0 and 1 are heavy, entry 3 the newest (protected)
  ASSERT_TRUE(o.comp->CompressChunk(o.cache, 6).ok());
  const kv::HeadStore& s = o.cache.head(0, 0);
  ASSERT_EQ(s.size(), 3);
  EXPECT_EQ(s.pos(0), 0);
  EXPECT_EQ(s.pos(1), 1);
  EXPECT_EQ(s.pos(2), 3);
  const kv::HeadStats& st = o.comp->stats().head(0, 0);
  EXPECT_NEAR(kv::taptest::Mass(st)[0], 1.4f, 1e-6);
  EXPECT_NEAR(kv::taptest::Mass(st)[1], 1.9f, 1e-6);
  EXPECT_NEAR(kv::taptest::Mass(st)[2], 0.3f, 1e-6);
  o.comp->BeginChunk(6, false);
  o.Chunk(4, {{.1f, .1f, .7f, .1f}, {.2f, .2f, .2f, .2f, .2f}});  // over the 3 kept + the chunk's own
  EXPECT_NEAR(kv::taptest::Mass(st)[0], 1.4f + .1f + .2f, 1e-6);
  EXPECT_NEAR(kv::taptest::Mass(st)[1], 1.9f + .1f + .2f, 1e-6);
  EXPECT_NEAR(kv::taptest::Mass(st)[2], 0.3f + .7f + .2f, 1e-6);
  EXPECT_NEAR(kv::taptest::Mass(st)[3], .1f + .2f, 1e-6);
  EXPECT_NEAR(kv::taptest::Mass(st)[4], .2f, 1e-6);
}

// SnapKV: each chunk's last window votes afresh over every entry held.
TEST(PrefillChunk, SnapkvVotesWithEachChunksLastWindow) {
  test::OneHead o = OneHeadFor("snapkv", 3, {{"obs-window", 1}, {"pool-kernel", 1}});
  o.comp->BeginChunk(4, true);
  o.Chunk(0, {{1.f}, {.5f, .5f}, {.2f, .2f, .6f}, {.1f, .6f, .2f, .1f}});
  const kv::HeadStats& st = o.comp->stats().head(0, 0);
  ASSERT_EQ(kv::taptest::WindowMass(st).size(), 4u);  // only the window (query 3) voted
  EXPECT_NEAR(kv::taptest::WindowMass(st)[1], .6f, 1e-6);
  EXPECT_NEAR(kv::taptest::WindowMass(st)[0], .1f, 1e-6);
  ASSERT_TRUE(o.comp->CompressChunk(o.cache, 6).ok());
  const kv::HeadStore& s = o.cache.head(0, 0);
  ASSERT_EQ(s.size(), 3);  // the window's entry 3, then the top two of {0.1, 0.6, 0.2}
  EXPECT_EQ(s.pos(0), 1);
  EXPECT_EQ(s.pos(1), 2);
  EXPECT_EQ(s.pos(2), 3);
  o.comp->BeginChunk(6, false);  // the first chunk's votes are gone
  for (float x : kv::taptest::WindowMass(st)) EXPECT_EQ(x, 0.f);
  o.Chunk(4, {{.25f, .25f, .25f, .25f}, {.4f, .1f, .1f, .1f, .3f}});
  ASSERT_EQ(kv::taptest::WindowMass(st).size(), 5u);
  EXPECT_NEAR(kv::taptest::WindowMass(st)[0], .4f, 1e-6);  // only query 5 (the second chunk's last) voted
  EXPECT_NEAR(kv::taptest::WindowMass(st)[1], .1f, 1e-6);
  EXPECT_NEAR(kv::taptest::WindowMass(st)[4], .3f, 1e-6);
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim
