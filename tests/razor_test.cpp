// RazorAttention (METHODS.md section 2): compensation entry, probe scoring,
// GQA promotion, decode-time fold, the profile file, and the policy on the
// needle model (its cache against the spec built by hand from the full
// cache, and the logits of that hand-built cache; unreachable ratios).
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>

#include "engine/engine_impl.h"
#include "kv/compressor.h"
#include "kv/policy.h"
#include "kv/profile.h"
#include "io/tokenizer.h"
#include "model/config.h"
#include "test_util.h"

namespace kvtrim::kv {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

// A profile for 1 layer, 4 query heads, 2 KV heads: query heads 2 (echo) and
// 3 (induction) are the top ones, so KV head 1 is retrieval and 0 is not.
std::shared_ptr<const ModelProfile> TinyProfile() {
  auto p = std::make_shared<ModelProfile>();
  p->n_layer = 1, p->n_head = 4, p->n_head_kv = 2, p->ctx = 64, p->probe_len = 15;
  p->echo = {0.1, 0.2, 0.9, 0.3};
  p->induction = {0.1, 0.2, 0.3, 0.8};
  p->heads = SelectRetrievalHeads(p->echo, p->induction, 1, 4, 2, p->echo_frac, p->induction_frac);
  return p;
}

std::unique_ptr<Policy> Razor(const Params& params, std::shared_ptr<const ModelProfile> prof = TinyProfile()) {
  auto pol = MakePolicy("razor", params);
  EXPECT_TRUE(pol.ok()) << (pol.ok() ? "" : pol.error().message);
  pol.value()->SetProfile(std::move(prof));
  return std::move(pol.value());
}

std::vector<float> RandomVec(std::mt19937& rng, int d) {
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> v(d);
  for (float& x : v) x = nd(rng);
  return v;
}

// Attention output over a head's entries, in double: softmax(q.k/sqrt(d) + b) v.
std::vector<double> Attend(const HeadStore& h, const std::vector<float>& q) {
  const int d = h.head_dim();
  std::vector<double> s(h.size()), out(d, 0.0);
  std::vector<float> k(d), v(d);
  double mx = -1e300, z = 0;
  for (int i = 0; i < h.size(); ++i) {
    h.ReadKey(i, k.data());
    double dot = 0;
    for (int j = 0; j < d; ++j) dot += double{q[j]} * k[j];
    s[i] = dot / std::sqrt(double(d)) + h.logw(i);
    mx = std::max(mx, s[i]);
  }
  for (int i = 0; i < h.size(); ++i) z += (s[i] = std::exp(s[i] - mx));
  for (int i = 0; i < h.size(); ++i) {
    h.ReadValue(i, v.data());
    for (int j = 0; j < d; ++j) out[j] += s[i] / z * v[j];
  }
  return out;
}

// The budget razor's castes give head (layer, head) of a two-head layout.
int CasteBudget(const Policy& pol, int layer, int head) {
  const budget::Spec s = pol.traits().budget;
  EXPECT_EQ(s.kind, budget::Kind::kCastes);
  return budget::HeadBudgets(s, 1, 1000000, layer + 1, 2, 1)[static_cast<size_t>(layer) * 2 + head];
}

Plan PlanFor(Policy& pol, const HeadStore& h, int layer, int head, Phase phase) {
  PolicyContext ctx;
  ctx.phase = phase;
  ctx.layer = layer;
  ctx.head = head;
  ctx.store = &h;
  ctx.budget = CasteBudget(pol, layer, head);
  ctx.logical_len = h.size();
  return pol.Compress(ctx);
}

TEST(Razor, CompensationExactWhenDroppedKeysAreEqual) {
  const int d = 16, n = 60, S = 4, L = 12;  // min window 12, C = 10: L = max(12, 6)
  std::mt19937 rng(7);
  HeadStore h(d, GgmlType::F32);
  const std::vector<float> same = RandomVec(rng, d);
  std::vector<double> vmean(d, 0.0);
  for (int i = 0; i < n; ++i) {
    const bool dropped = i >= S && i < n - L;
    std::vector<float> k = dropped ? same : RandomVec(rng, d), v = RandomVec(rng, d);
    if (dropped)
      for (int j = 0; j < d; ++j) vmean[j] += v[j] / double(n - L - S);
    h.Append(k.data(), v.data(), i, 0.f);
  }
  HeadStore full = h;
  auto pol = Razor({{"sinks", S}, {"min-window", L}, {"compress-factor", 10}});
  // Ratio 1 asked for (budget::Target::ratio_explicit): every head keeps all.
  ASSERT_TRUE(pol->Prepare({{1.0, 0, true}, n, 1, 2}).ok());
  EXPECT_TRUE(PlanFor(*pol, h, 0, 0, Phase::kPrefill).noop);
  // Ratio 1 by default: the compression factor sizes the window.
  ASSERT_TRUE(pol->Prepare({{1.0, 0, false}, n, 1, 2}).ok());
  EXPECT_EQ(CasteBudget(*pol, 0, 0), S + L + 1);
  EXPECT_EQ(CasteBudget(*pol, 0, 1), INT_MAX);  // retrieval KV head keeps all
  EXPECT_TRUE(PlanFor(*pol, h, 0, 1, Phase::kPrefill).noop);
  Plan plan = PlanFor(*pol, h, 0, 0, Phase::kPrefill);
  ASSERT_TRUE(ValidatePlan(plan, n, d).ok());
  h.Apply(plan);
  ASSERT_EQ(h.size(), S + 1 + L);
  // The compensation entry: mean key, mean value, b = log N_d, mean position.
  const int nd = n - L - S;
  EXPECT_NEAR(h.logw(S), std::log(double(nd)), 1e-6);
  EXPECT_EQ(h.pos(S), static_cast<int>(std::lround((S + n - L - 1) / 2.0)));
  std::vector<float> row(d);
  h.ReadKey(S, row.data());
  for (int j = 0; j < d; ++j) EXPECT_NEAR(row[j], same[j], 1e-6);
  h.ReadValue(S, row.data());
  for (int j = 0; j < d; ++j) EXPECT_NEAR(row[j], vmean[j], 1e-5);
  for (int i = 0; i < S; ++i) EXPECT_EQ(h.pos(i), i);
  for (int i = 0; i < L; ++i) EXPECT_EQ(h.pos(S + 1 + i), n - L + i);
  for (int t = 0; t < 8; ++t) {  // any query: the same output as the full head
    std::vector<float> q = RandomVec(rng, d);
    for (float& x : q) x *= 3.f;
    const auto a = Attend(full, q), b = Attend(h, q);
    for (int j = 0; j < d; ++j) EXPECT_NEAR(a[j], b[j], 1e-5) << "query " << t << " dim " << j;
  }
}

TEST(Razor, ProbeScoresOnHandBuiltAttention) {
  const int K = 3, n_tok = 1 + 4 * K;  // BOS + 4 x 3
  ProbeScorer sc(1, 1, 2, K);
  // Query head 0 puts 0.6 on the previous occurrence and 0.4 on the token
  // after it from the second copy on; head 1 attends uniformly. Two batches.
  for (int b0 : {0, 7}) {
    const int T = b0 == 0 ? 7 : n_tok - 7;
    sc.OnBatch(b0, T);
    for (int t = 0; t < T; ++t) {
      const int i = b0 + t, n = i + 1;
      std::vector<float> p0(n, 0.f), p1(n, 1.f / n);
      if (i >= 1 + K) p0[i - K] = 0.6f, p0[i - K + 1] = 0.4f;
      else p0[0] = 1.f;
      sc.OnProbs(0, 0, t, 0, p0.data(), n);
      sc.OnProbs(0, 0, t, 1, p1.data(), n);
    }
  }
  // Head 1: mean of 1/(i+1) over the query positions 4..12.
  double uni = 0;
  for (int i = 1 + K; i < n_tok; ++i) uni += 1.0 / (i + 1);
  uni /= n_tok - 1 - K;
  const auto e = sc.echo(), ind = sc.induction();
  ASSERT_EQ(e.size(), 2u);
  EXPECT_NEAR(e[0], 0.6, 1e-6);
  EXPECT_NEAR(ind[0], 0.4, 1e-6);
  EXPECT_NEAR(e[1], uni, 1e-6);
  EXPECT_NEAR(ind[1], uni, 1e-6);
}

TEST(Razor, RetrievalHeadsAndGqaPromotion) {
  // 2 layers x 8 query heads, 2 KV heads (4 query heads each): top 1 of 16 by
  // echo (ceil 0.16) is L1H5, top 3 by induction (ceil 2.24) L0H0, L0H1, L1H6.
  std::vector<double> echo(16, 0.1), ind(16, 0.05);
  echo[13] = 0.9, echo[0] = 0.5;
  ind[0] = 0.7, ind[1] = 0.6, ind[14] = 0.5, ind[2] = 0.4;
  RetrievalHeads r = SelectRetrievalHeads(echo, ind, 2, 8, 2, 0.01, 0.14);
  EXPECT_EQ(r.n_echo, 1);
  EXPECT_EQ(r.n_induction, 3);
  EXPECT_EQ(r.query, (std::vector<int>{0, 1, 13, 14}));
  EXPECT_EQ(r.kv, (std::vector<char>{1, 0, 0, 1}));
  EXPECT_DOUBLE_EQ(r.f_ret, 0.5);
  EXPECT_NEAR(MinReachableRatio(r, 1000, 4, 64), 0.5 + 0.5 * 69 / 1000.0, 1e-12);
}

TEST(Razor, FoldOneAtATimeEqualsCompressingAtOnce) {
  const int d = 8, n0 = 40, m = 15, S = 2, L = 8;
  std::mt19937 rng(3);
  std::vector<std::vector<float>> ks, vs;
  for (int i = 0; i < n0 + m; ++i) ks.push_back(RandomVec(rng, d)), vs.push_back(RandomVec(rng, d));
  KvOptions o;
  o.policy = "razor";
  o.params = {{"sinks", S}, {"min-window", L}, {"compress-factor", 1000}, {"razor-fold", 1}};
  // Through the Compressor: prefill-time compression, then one fold per decode step.
  KvCache cache(1, 2, d);
  auto c = Compressor::Create(o, 1, 2, 2, d);
  ASSERT_TRUE(c.ok()) << c.error().message;
  c.value()->policy().SetProfile(TinyProfile());
  auto append = [&](int i) {
    for (int h = 0; h < 2; ++h) cache.head(0, h).Append(ks[i].data(), vs[i].data(), i, 0.f);
    cache.AdvanceLogical(1);
  };
  for (int i = 0; i < n0; ++i) append(i);
  ASSERT_TRUE(c.value()->CompressPrefill(cache).ok());
  for (int i = n0; i < n0 + m; ++i) {
    append(i);
    ASSERT_TRUE(c.value()->AfterDecodeStep(cache).ok());
    ASSERT_EQ(cache.head(0, 0).size(), S + 1 + L);
    EXPECT_NEAR(cache.head(0, 0).logw(S), std::log(double(i + 1 - S - L)), 1e-5);
  }
  EXPECT_EQ(cache.head(0, 1).size(), n0 + m);  // retrieval head: everything
  // All at once on the policy.
  HeadStore once(d, GgmlType::F32);
  for (int i = 0; i < n0 + m; ++i) once.Append(ks[i].data(), vs[i].data(), i, 0.f);
  auto pol = Razor(o.params);
  ASSERT_TRUE(pol->Prepare({{1.0, 0, false}, n0 + m, 1, 2}).ok());
  once.Apply(PlanFor(*pol, once, 0, 0, Phase::kPrefill));
  const HeadStore& folded = cache.head(0, 0);
  ASSERT_EQ(once.size(), folded.size());
  std::vector<float> a(d), b(d);
  // The folded compensation entry keeps its prefill position (metadata only).
  EXPECT_GT(folded.pos(S), S - 1);
  EXPECT_LT(folded.pos(S), n0 + m - L);
  for (int i = 0; i < once.size(); ++i) {
    if (i != S) {
      EXPECT_EQ(once.pos(i), folded.pos(i)) << i;
    }
    EXPECT_NEAR(once.logw(i), folded.logw(i), 1e-5) << i;
    once.ReadKey(i, a.data()), folded.ReadKey(i, b.data());
    for (int j = 0; j < d; ++j) EXPECT_NEAR(a[j], b[j], 1e-5) << i;
    once.ReadValue(i, a.data()), folded.ReadValue(i, b.data());
    for (int j = 0; j < d; ++j) EXPECT_NEAR(a[j], b[j], 1e-5) << i;
  }
}

TEST(Razor, ProfileRoundTripAndRefusals) {
  ModelProfile p = *TinyProfile();
  p.model = {"m.gguf", 1234, "00112233deadbeef"};
  p.seed = 9, p.seconds = 0.25;
  p.extra["head_budgets"] = "[1,2]";  // a later method's field survives
  const std::string dir = ::testing::TempDir();
  const std::string path = dir + "/razor_profile.json";
  ASSERT_TRUE(WriteProfile(path, p).ok());
  auto r = ReadProfile(path);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(ProfileToJson(r.value()), ProfileToJson(p));
  EXPECT_EQ(r->model, p.model);
  EXPECT_EQ(r->echo, p.echo);
  EXPECT_EQ(r->heads.kv, (std::vector<char>{0, 1}));
  EXPECT_EQ(r->extra.at("head_budgets"), "[1,2]");
  EXPECT_TRUE(CheckProfileFor(r.value(), p.model, 1, 4, 2).ok());
  Status other = CheckProfileFor(r.value(), {"m.gguf", 1234, "ffffffffffffffff"}, 1, 4, 2);
  EXPECT_NE(other.message().find("another model"), std::string::npos) << other.message();
  auto refused = [&](const std::string& text, const std::string& what) {
    { std::ofstream(path) << text; }
    auto q = ReadProfile(path);
    ASSERT_FALSE(q.ok()) << text;
    EXPECT_NE(q.error().message.find(what), std::string::npos) << q.error().message;
  };
  const std::string good = ProfileToJson(p).dump();
  refused(good.substr(0, good.size() / 2), "not valid JSON");
  nlohmann::json j = ProfileToJson(p);
  j["version"] = 99;
  refused(j.dump(), "version 99");
  j = ProfileToJson(p);
  j.erase("echo");
  refused(j.dump(), "echo");
  j = ProfileToJson(p);
  j["induction"] = {0.1, 0.2};
  refused(j.dump(), "2 induction scores for 4 query heads");
  j = ProfileToJson(p);
  j["echo"][0] = 7.0;
  refused(j.dump(), "outside [0, 1]");
  std::remove(path.c_str());
}

// --- on the needle model ---

std::vector<int> Prompt(const Engine& e, int n) {
  std::string text = test::ReadFile(test::SharedPath("data/frankenstein.txt")).substr(5000, 20000);
  std::vector<int> t = e.impl().tokenizer().Encode(text, true);
  t.resize(n);
  return t;
}

TEST(Razor, ProfileOfNeedleModelFindsItsCopyHead) {
  auto e = test::LoadEngine("needle-v1-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  auto p = e->Profile("");
  ASSERT_TRUE(p.ok()) << p.error().message;
  const ModelProfile& prof = *p.value();
  EXPECT_EQ(prof.probe_len, 255);  // min(2500, 1024 / 4 - 1)
  // MODELS.md: a copy head at layer 3, head 0 by construction.
  EXPECT_NE(std::find(prof.heads.query.begin(), prof.heads.query.end(), 3 * 8 + 0), prof.heads.query.end());
  EXPECT_TRUE(prof.heads.kv[3 * 4 + 0]);
  EXPECT_GT(prof.induction_at(3, 0), 0.3);
  EXPECT_EQ(e->Profile("").value().get(), &prof);  // cached: probed once
  // A profile of another model (v0: same shapes and metadata layout) is refused.
  auto v0 = test::LoadEngine("needle-3.7M-f32.gguf");
  ASSERT_TRUE(v0);
  EXPECT_NE(v0->model_id().metadata_hash, e->model_id().metadata_hash);
  ModelProfile wrong = prof;
  wrong.model = v0->model_id();
  const std::string path = ::testing::TempDir() + "/razor_v0_profile.json";
  ASSERT_TRUE(WriteProfile(path, wrong).ok());
  auto r = e->Profile(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("another model"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("needle-3.7M-f32.gguf"), std::string::npos) << r.error().message;
  std::remove(path.c_str());
}

// The razor cache at C = 5 on a 400-token prompt against METHODS.md section
// 2 written out by hand from the full cache: retrieval KV heads (from the
// profile) whole; every other head the S = 4 sinks, ONE compensation entry
// (mean of the dropped keys and values in float64, b = log N_d) and the
// recent window L = max(S0, N / C) = max(64, 80) = 80. Then the full
// session with those plans applied by hand decodes the same logits as the
// razor session. (At C = 1 the window would cover everything: vacuous.)
TEST(Razor, CompressedCacheMatchesTheSpecBuiltByHand) {
  auto e = test::LoadEngine("needle-v1-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  const int N = 400, S = 4, L = 80;
  const std::vector<int> prompt = Prompt(*e, N), next = {300, 301, 302};
  auto full = Session::Create(*e, {});
  ASSERT_TRUE(full.ok());
  ASSERT_TRUE(full.value()->Prefill(prompt).ok());
  SessionOptions so;
  so.kv.policy = "razor";
  so.kv.params = {{"compress-factor", 5}};
  auto razor = Session::Create(*e, so);
  ASSERT_TRUE(razor.ok());
  ASSERT_TRUE(razor.value()->Prefill(prompt).ok());
  ASSERT_TRUE(razor.value()->Compress().ok());
  const auto& prof = *e->Profile("").value();
  KvCache& fc = full.value()->impl().cache();
  const KvCache& rc = razor.value()->impl().cache();
  const int d = fc.head(0, 0).head_dim();
  int n_retrieval = 0;
  for (int l = 0; l < fc.n_layer(); ++l)
    for (int h = 0; h < fc.n_head_kv(); ++h) {
      const HeadStore& f = fc.head(l, h);
      const HeadStore& r = rc.head(l, h);
      std::vector<float> fk(d), fv(d), rk(d), rv(d);
      if (prof.heads.kv[l * fc.n_head_kv() + h]) {  // retrieval: the full head
        ++n_retrieval;
        ASSERT_EQ(r.size(), N);
        for (int i = 0; i < N; i += 37) {
          f.ReadKey(i, fk.data()), r.ReadKey(i, rk.data());
          EXPECT_EQ(fk, rk);
        }
        continue;
      }
      ASSERT_EQ(r.size(), S + 1 + L) << l << "," << h;
      std::vector<double> mk(d, 0.0), mv(d, 0.0);
      for (int i = S; i < N - L; ++i) {
        f.ReadKey(i, fk.data()), f.ReadValue(i, fv.data());
        for (int j = 0; j < d; ++j) mk[j] += fk[j] / double(N - L - S), mv[j] += fv[j] / double(N - L - S);
      }
      for (int i = 0; i < r.size(); ++i) {
        r.ReadKey(i, rk.data()), r.ReadValue(i, rv.data());
        if (i == S) {  // the compensation entry
          EXPECT_NEAR(r.logw(i), std::log(double(N - L - S)), 1e-5);
          for (int j = 0; j < d; ++j) {
            EXPECT_NEAR(rk[j], mk[j], 1e-5);
            EXPECT_NEAR(rv[j], mv[j], 1e-5);
          }
          continue;
        }
        const int src = i < S ? i : N - L + (i - S - 1);
        EXPECT_EQ(r.pos(i), src);
        EXPECT_EQ(r.logw(i), 0.f);
        f.ReadKey(src, fk.data()), f.ReadValue(src, fv.data());
        EXPECT_EQ(fk, rk);
        EXPECT_EQ(fv, rv);
      }
    }
  EXPECT_GT(n_retrieval, 0);
  EXPECT_LT(n_retrieval, fc.n_layer() * fc.n_head_kv());
  // The same cache made by hand from the full session, then decoded.
  for (int l = 0; l < fc.n_layer(); ++l)
    for (int h = 0; h < fc.n_head_kv(); ++h) {
      if (prof.heads.kv[l * fc.n_head_kv() + h]) continue;
      Plan p;
      p.noop = false;
      MergeEntry m;
      for (int i = 0; i < N; ++i) {
        if (i < S || i >= N - L) p.keep.push_back(i);
        else m.sources.push_back(i), m.key_weights.push_back(1.f / (N - L - S));
      }
      p.merge.push_back(std::move(m));
      fc.head(l, h).Apply(p);
    }
  for (int t : next) {
    ASSERT_TRUE(full.value()->Decode(t).ok());
    ASSERT_TRUE(razor.value()->Decode(t).ok());
  }
  const std::vector<float>& a = full.value()->logits();
  const std::vector<float>& b = razor.value()->logits();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-4) << i;
}

TEST(Razor, RatiosBelowTheReachableMinimumAreRefused) {
  auto e = test::LoadEngine("needle-v1-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  const std::vector<int> prompt = Prompt(*e, 400);
  SessionOptions so;
  so.kv.policy = "razor";
  const auto& prof = *e->Profile("").value();
  const double min_r = MinReachableRatio(prof.heads, 400, 4, 64);
  so.kv.ratio = min_r - 0.02;
  auto s = Session::Create(*e, so);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(s.value()->Prefill(prompt).ok());
  const size_t before = s.value()->impl().cache().EntriesHeld();
  Status st = s.value()->Compress();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), ErrorCode::kUnreachable);
  EXPECT_NE(st.message().find("reachable"), std::string::npos) << st.message();
  EXPECT_EQ(s.value()->impl().cache().EntriesHeld(), before);  // refused before any head changed
}

TEST(Razor, RatioSolvesTheWindow) {
  auto e = test::LoadEngine("needle-v1-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  const int N = 600;
  const std::vector<int> prompt = Prompt(*e, N);
  const auto& prof = *e->Profile("").value();
  const int T = 16, R = static_cast<int>(std::lround(prof.heads.f_ret * T));
  // --kv-budget B is the ratio B / N (270 / 600 = 0.45).
  for (auto [r, budget] : {std::pair{0.6, 0}, std::pair{0.45, 0}, std::pair{0.45, 270}}) {
    SessionOptions so;
    so.kv.policy = "razor";
    so.kv.ratio = budget > 0 ? 1.0 : r;
    so.kv.budget_tokens = budget;
    auto s = Session::Create(*e, so);
    ASSERT_TRUE(s.ok()) << s.error().message;
    ASSERT_TRUE(s.value()->Prefill(prompt).ok());
    Status st = s.value()->Compress();
    ASSERT_TRUE(st.ok()) << st.message();
    // f N + (1 - f)(S + L + 1) = r N, L rounded down: at most r N T entries,
    // within one entry per non-retrieval head of it.
    const double held = static_cast<double>(s.value()->impl().cache().EntriesHeld());
    EXPECT_LE(held, r * N * T + 1e-9) << r;
    EXPECT_GT(held, r * N * T - (T - R)) << r;
    const int L = static_cast<int>(std::floor((r * N * T - R * N) / (T - R) - 5 + 1e-9));
    for (int l = 0; l < 4; ++l)
      for (int h = 0; h < 4; ++h)
        EXPECT_EQ(s.value()->impl().cache().head(l, h).size(), prof.heads.kv[l * 4 + h] ? N : 4 + 1 + L) << l << " " << h;
  }
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::kv

namespace kvtrim::kv {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

// The CLI: `profile` writes a profile that `run --kv razor --profile` uses;
// an unreachable ratio is an error (exit 1) naming the reachable minimum.
TEST(Razor, CliProfileThenRun) {
  const std::string cli = KVTRIM_CLI, model = test::ModelPath("needle-v1-3.7M-f32.gguf");
  const std::string prof = ::testing::TempDir() + "/razor_cli_profile.json";
  auto p = test::RunCommand(cli + " profile -m " + model + " --out " + prof + " --no-plots --depth 976");
  ASSERT_EQ(p.code, 0) << p.out;
  EXPECT_NE(p.out.find("L3K0"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("min reachable retention ratio at N = 976"), std::string::npos) << p.out;
  auto r = ReadProfile(prof);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const std::string prompt = " -p 'It was on a dreary night of November that I beheld the accomplishment of my toils.'";
  auto ok = test::RunCommand(cli + " run -m " + model + prompt + " -n 4 --temp 0 --kv razor --profile " + prof +
                             " --min-window 4 --kv-ratio 0.8 --razor-fold 2>&1");
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_NE(ok.out.find("kv: razor ratio 0.8"), std::string::npos) << ok.out;
  auto bad = test::RunCommand(cli + " run -m " + model + prompt + " -n 4 --temp 0 --kv razor --profile " + prof +
                              " --kv-ratio 0.1 2>&1");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.out.find("is below the"), std::string::npos) << bad.out;
  auto other = test::RunCommand(cli + " run -m " + test::ModelPath("needle-3.7M-f32.gguf") + prompt +
                                " -n 4 --kv razor --profile " + prof + " 2>&1");
  EXPECT_EQ(other.code, 1);
  EXPECT_NE(other.out.find("another model"), std::string::npos) << other.out;
  std::remove(prof.c_str());
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::kv
