// KVzip+ (docs/policies-2.md): the tap's p / ||h_t|| per query head by
// hand, the model's hidden norms and output-projection Gram blocks against a
// float64 evaluation of the tiny model's own weights, the policy's score
// p ||W_o,g v|| / ||h|| by hand, and the whole pass on a GQA model against an
// independent record of the reconstruction with ||W_o,g v_j|| computed
// directly from W_o.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <tuple>
#include <unistd.h>

#include "engine/engine_impl.h"
#include "kv/cache.h"
#include "kv/compressor.h"
#include "kv/policy.h"
#include "kv/stats.h"
#include "kv/taps/max_prob_over_h.h"
#include "kvtrim/engine.h"
#include "model/output_gram.h"
#include "model/transformer.h"
#include "io/tokenizer.h"
#include "global_top.h"
#include "tiny_llama.h"

namespace kvtrim::kv {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

// 2 queries x 2 group heads over 3 entries, causal from entry 1, with
// ||h|| = 2 and 0.5: each entry keeps, per g, its largest p / ||h||.
TEST(MaxProbOverHTap, LargestProbOverHiddenNormPerQueryHeadByHand) {
  const TapInfo* info = FindTap(kMaxProbOverHTap);
  ASSERT_NE(info, nullptr);
  EXPECT_TRUE(info->hidden_norms);
  const std::vector<float> p = {0.6f, 0.4f, 0.f, 0.1f, 0.9f, 0.f,   // query 0, g = 0, 1
                                0.2f, 0.3f, 0.5f, 0.7f, 0.1f, 0.2f};  // query 1
  ProbTile tile;
  tile.t0 = 0, tile.t1 = 2, tile.G = 2, tile.j0 = 0, tile.j1 = 3, tile.n_visible0 = 1, tile.n = 3;
  tile.p = p.data(), tile.ld = 3;
  const std::vector<float> h = {2.f, 0.5f};
  TapClock clock{10, 11, -1, h.data()};
  auto s = info->make({2, 4});
  s->OnTile(tile, clock);
  const auto* m = dynamic_cast<const MaxProbOverHStat*>(s.get());
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(m->size(), 3);
  // entry 0: g0 max(0.6/2, 0.2/0.5) = 0.4, g1 max(0.1/2, 0.7/0.5) = 1.4
  // entry 1: g0 max(0.4/2, 0.3/0.5) = 0.6, g1 max(0.9/2, 0.1/0.5) = 0.45
  // entry 2 (query 1 only): g0 0.5/0.5 = 1, g1 0.2/0.5 = 0.4
  const std::vector<std::vector<float>> want = {{0.4f, 1.4f}, {0.6f, 0.45f}, {1.f, 0.4f}};
  for (int j = 0; j < 3; ++j)
    for (int g = 0; g < 2; ++g) EXPECT_FLOAT_EQ(m->at(j, g), want[j][g]) << j << " " << g;
  s->Rebuild({{0, 2}, {1}});  // entry 0 = merge of old 0 and 2: the larger per g
  EXPECT_FLOAT_EQ(m->at(0, 0), 1.f);
  EXPECT_FLOAT_EQ(m->at(0, 1), 1.4f);
  s->Retain({1, 2});  // entry 2 is new: 0
  ASSERT_EQ(m->size(), 2);
  EXPECT_FLOAT_EQ(m->at(0, 0), 0.6f);
  EXPECT_FLOAT_EQ(m->at(1, 0), 0.f);
  EXPECT_FLOAT_EQ(m->at(1, 1), 0.f);
}

// Three entries of one head (G = 2, d = 2): the reconstruction favours
// entry 0, but its value barely reaches the residual stream through W_o.
TEST(KvzipPlusPolicy, ScoresByProbTimesOutputNormByHand) {
  HeadStore store(2, GgmlType::F32);
  const std::vector<std::vector<float>> v = {{0.1f, 0.f}, {0.f, 1.f}, {1.f, 1.f}};
  for (int i = 0; i < 3; ++i) store.Append(v[i].data(), v[i].data(), i, 0.f);
  HeadStats st;
  // max_t p / ||h|| per (entry, g)
  st.reference.Add(kMaxProbOverHTap, std::make_unique<MaxProbOverHStat>(2, std::vector<float>{0.9f, 0.8f,     // 0
                                                                                              0.2f, 0.1f,     // 1
                                                                                              0.3f, 0.05f}));  // 2
  // M_0 = diag(4, 1) (W_o,0 = diag(2, 1)), M_1 = [[1, 1], [1, 1]] (W_o,1 = [1 1]).
  const std::vector<float> gram = {4, 0, 0, 1, 1, 1, 1, 1};
  PolicyContext ctx;
  ctx.store = &store;
  ctx.stats = &st;
  ctx.out_gram = gram.data();
  auto pol = MakePolicy("kvzip+", {});
  ASSERT_TRUE(pol.ok());
  // ||W_o,0 v||: 0.2, 1, sqrt(5); ||W_o,1 v||: 0.1, 1, 2.
  // s_0 = max(0.9 * 0.2, 0.8 * 0.1) = 0.18; s_1 = max(0.2, 0.1) = 0.2;
  // s_2 = max(0.3 sqrt(5), 0.05 * 2) = 0.6708.
  const EntryScores sc = pol.value()->Score(ctx);
  ASSERT_EQ(sc.score.size(), 3u);
  EXPECT_NEAR(sc.score[0], 0.18, 1e-6);
  EXPECT_NEAR(sc.score[1], 0.2, 1e-6);
  EXPECT_NEAR(sc.score[2], 0.3 * std::sqrt(5.0), 1e-6);
  ctx.budget = 2;
  EXPECT_EQ(pol.value()->Compress(ctx).keep, (std::vector<int>{1, 2}));  // plain KVzip would keep 0
}

struct TempModel {
  std::string path;
  ~TempModel() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
};

// A GQA tiny llama (4 query heads over 2 KV heads of dim 16), on disk.
std::pair<test::TinyModel, std::unique_ptr<TempModel>> TinyGqa() {
  test::TinySpec s;
  s.rope_dims = 16;
  test::TinyModel m = test::MakeTinyModel(s);
  auto f = std::make_unique<TempModel>();
  f->path = (std::filesystem::temp_directory_path() / (std::to_string(getpid()) + "-kvtrim-kvzip-plus.gguf")).string();
  std::ofstream(f->path, std::ios::binary) << m.bytes;
  return {std::move(m), std::move(f)};
}

std::vector<int> Tokens(int n, int vocab, uint32_t seed) {
  std::mt19937 g(seed);
  std::vector<int> t{1};  // BOS
  for (int i = 1; i < n; ++i) t.push_back(3 + static_cast<int>(g() % static_cast<uint32_t>(vocab - 3)));
  return t;
}

// ||W_o,q v|| straight from the written W_o ([D rows][n_head*hd cols]), in double.
double OutputNorm(const test::TinyModel& m, int layer, int q, const float* v, int D, int Q, int hd) {
  const std::vector<float>& w = m.w.at("blk." + std::to_string(layer) + ".attn_output.weight");
  double ss = 0;
  for (int r = 0; r < D; ++r) {
    double y = 0;
    for (int a = 0; a < hd; ++a) y += static_cast<double>(w[static_cast<size_t>(r) * Q + q * hd + a]) * v[a];
    ss += y * y;
  }
  return std::sqrt(ss);
}

// Records the hidden norms the model reports, per layer.
class NormTap : public AttentionTap {
 public:
  bool WantsHiddenNorms() const override { return true; }
  void OnHiddenNorms(int layer, const float* n, int T) override { norms[layer].assign(n, n + T); }
  std::map<int, std::vector<float>> norms;
};

TEST(KvzipPlusModel, HiddenNormsAndOutputGramsAgainstFloat64) {
  auto [m, file] = TinyGqa();
  auto e = Engine::Load({file->path, 2});
  ASSERT_TRUE(e.ok()) << e.error().message;
  const model::ModelConfig& c = e.value()->impl().config();
  const int D = c.dim, hd = c.head_dim, Q = c.n_head * hd;
  ASSERT_EQ(c.group(), 2);
  // Layer 0's input is the embedding: ||RmsNorm(e_tok) * g||.
  const std::vector<int> toks = Tokens(9, m.vocab, 4);
  KvCache cache(c.n_layer, c.n_head_kv, hd);
  NormTap tap;
  std::vector<float> logits;
  ASSERT_TRUE(e.value()->impl().transformer().Forward(e.value()->impl().pool(), cache, toks.data(), 9, false, &logits, &tap).ok());
  ASSERT_EQ(tap.norms.size(), static_cast<size_t>(c.n_layer));
  const std::vector<float>& embd = m.w.at("token_embd.weight");
  const std::vector<float>& g = m.w.at("blk.0.attn_norm.weight");
  for (int t = 0; t < 9; ++t) {
    const float* x = embd.data() + static_cast<size_t>(toks[t]) * D;
    double ss = 0;
    for (int i = 0; i < D; ++i) ss += static_cast<double>(x[i]) * x[i];
    const double inv = 1.0 / std::sqrt(ss / D + 1e-5);
    double hh = 0;
    for (int i = 0; i < D; ++i) hh += std::pow(x[i] * inv * g[i], 2);
    EXPECT_NEAR(tap.norms[0][t], std::sqrt(hh), 1e-4 * std::sqrt(hh)) << t;
  }
  // sqrt(v^T M v) = ||W_o,q v|| for every layer and query head.
  const std::vector<float> gram = model::OutputGrams(c, e.value()->impl().transformer().weights());
  ASSERT_EQ(gram.size(), static_cast<size_t>(c.n_layer) * c.n_head * hd * hd);
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  std::vector<float> v(hd);
  for (int l = 0; l < c.n_layer; ++l)
    for (int q = 0; q < c.n_head; ++q) {
      for (float& x : v) x = nd(rng);
      const float* M = gram.data() + (static_cast<size_t>(l) * c.n_head + q) * hd * hd;
      double vmv = 0;
      for (int a = 0; a < hd; ++a)
        for (int b = 0; b < hd; ++b) vmv += static_cast<double>(v[a]) * M[a * hd + b] * v[b];
      const double want = OutputNorm(m, l, q, v.data(), D, Q, hd);
      EXPECT_NEAR(std::sqrt(vmv), want, 1e-4 * want) << "layer " << l << " head " << q;
    }
}

// An independent record of the reconstruction: max over queries t and group
// heads g of p * ||W_o,g v_j|| / ||h_t||, ||W_o,g v_j|| from W_o directly.
class PlusTap : public AttentionTap {
 public:
  PlusTap(const std::vector<std::vector<std::vector<double>>>* wov, int H, int n)
      : wov_(wov), m_(wov->size(), std::vector<double>(n, 0.0)), H_(H) {}
  bool WantsProbs(int) const override { return true; }
  bool WantsHiddenNorms() const override { return true; }
  void OnHiddenNorms(int layer, const float* n, int T) override { h_[layer].assign(n, n + T); }
  void OnProbTile(int layer, int h, const ProbTile& tile) override {
    const size_t f = static_cast<size_t>(layer) * H_ + h;
    std::vector<double>& m = m_[f];
    for (int t = tile.t0; t < tile.t1; ++t)
      for (int g = 0; g < tile.G; ++g)
        for (int j = tile.j0; j < tile.j1 && j < static_cast<int>(m.size()); ++j)
          m[j] = std::max(m[j], tile.Row(t, g)[j - tile.j0] * (*wov_)[f][g][j] / h_[layer][t]);
  }
  const std::vector<std::vector<std::vector<double>>>* wov_;  // [flat head][g][entry]
  std::vector<std::vector<double>> m_;
  std::map<int, std::vector<float>> h_;
  int H_;
};

TEST(KvzipPlusEndToEnd, KeepsTheGlobalTopOfTheNormalisedReconstruction) {
  auto [m, file] = TinyGqa();
  auto loaded = Engine::Load({file->path, 2});
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  const Engine& e = *loaded.value();
  const auto& c = e.impl().config();
  const int L = c.n_layer, H = c.n_head_kv, G = c.group(), hd = c.head_dim;
  const std::vector<int> toks = Tokens(96, m.vocab, 11);
  const int n = static_cast<int>(toks.size());
  const double r = 0.25;
  auto run = [&](const std::string& policy) {
    SessionOptions so;
    so.kv.policy = policy;
    so.kv.ratio = r;
    auto s = Session::Create(e, so);
    EXPECT_TRUE(s.ok()) << s.error().message;
    EXPECT_TRUE(s.value()->Prefill(toks).ok());
    EXPECT_TRUE(s.value()->Compress().ok());
    return std::move(s.value());
  };
  auto s = run("kvzip+");

  // The pass by hand over a copy of the full cache.
  auto full = Session::Create(e, {});
  ASSERT_TRUE(full.ok());
  ASSERT_TRUE(full.value()->Prefill(toks).ok());
  KvCache copy(full.value()->impl().cache());
  std::vector<std::vector<std::vector<double>>> wov(static_cast<size_t>(L) * H,
                                                    std::vector<std::vector<double>>(G, std::vector<double>(n)));
  std::vector<float> v(hd);
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h)
      for (int j = 0; j < n; ++j) {
        copy.head(l, h).ReadValue(j, v.data());
        for (int g = 0; g < G; ++g) wov[l * H + h][g][j] = OutputNorm(m, l, h * G + g, v.data(), c.dim, c.n_head * hd, hd);
      }
  PlusTap tap(&wov, H, n);
  std::vector<float> logits;
  std::vector<int> instr = e.impl().tokenizer().Encode("\nRepeat the previous context:\n", false);
  ASSERT_TRUE(e.impl().transformer().Forward(e.impl().pool(), copy, instr.data(), static_cast<int>(instr.size()), false, &logits).ok());
  ASSERT_TRUE(e.impl().transformer().Forward(e.impl().pool(), copy, toks.data() + 1, n - 1, false, &logits, &tap).ok());

  // Each head's best entry (the floor of 1), then the best of the rest.
  const int total = L * H * static_cast<int>(std::ceil(r * n));
  std::vector<std::vector<int>> want = test::GlobalTopWithFloor(tap.m_, total);
  auto kept = [&](const Session& x, int l, int h) {
    std::vector<int> got;
    for (int i = 0; i < x.impl().cache().head(l, h).size(); ++i) got.push_back(x.impl().cache().head(l, h).pos(i));
    return got;
  };
  int held = 0;
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) {
      const std::vector<int>& w = want[l * H + h];
      EXPECT_EQ(kept(*s, l, h), w) << "layer " << l << " head " << h;
      held += s->impl().cache().head(l, h).size();
    }
  EXPECT_EQ(held, total);
  // The normalisation changes what is kept: plain KVzip keeps other entries.
  auto plain = run("kvzip");
  int differ = 0;
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) differ += kept(*plain, l, h) != kept(*s, l, h);
  EXPECT_GT(differ, 0);
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::kv
