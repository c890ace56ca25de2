// Llama 3 / Qwen2 as published: untied output, RoPE frequency factors
// (rope_freqs.weight), linear RoPE scaling, partial rotary
// (rope.dimension_count < head_dim), general.file_type; errors naming the
// key; and the sampler's partial nucleus selection on a 128K vocabulary.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <fstream>
#include <numeric>

#include <unistd.h>

#include "engine/engine_impl.h"
#include "chat_templates.h"
#include "io/gguf.h"
#include "io/tokenizer.h"
#include "kvtrim/chat.h"
#include "kvtrim/engine.h"
#include "model/config.h"
#include "model/rope.h"
#include "model/transformer.h"
#include "sampler_reference.h"
#include "tiny_llama.h"

namespace kvtrim {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

using test::TinyModel;
using test::TinySpec;

// A file in the temp dir, named per process (ctest runs tests in parallel)
// and removed afterwards, unless `keep` (then named as given).
struct TempFile {
  std::string path;
  bool keep = false;
  ~TempFile() {
    std::error_code ec;
    if (!keep) std::filesystem::remove(path, ec);
  }
};
TempFile WriteTemp(const std::string& name, const std::string& bytes, bool keep = false) {
  const std::string file = keep ? name : std::to_string(getpid()) + "-" + name;
  const std::string path = (std::filesystem::temp_directory_path() / file).string();
  std::ofstream(path, std::ios::binary) << bytes;
  return TempFile{path, keep};  // a prvalue: no copy whose destructor could remove the file
}

// ---- independent float64 reference forward pass -------------------------

using Vec = std::vector<double>;

Vec MatVec(const std::vector<float>& w, int rows, int cols, const Vec& x) {
  Vec y(rows, 0.0);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) y[r] += static_cast<double>(w[static_cast<size_t>(r) * cols + c]) * x[c];
  return y;
}

Vec RmsNorm(const Vec& x, const std::vector<float>& g) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double s = 1.0 / std::sqrt(ss / x.size() + 1e-5);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * s * g[i];
  return y;
}

// What the reference rotates by: linear scaling, factors, YaRN.
struct RefRopeSpec {
  double freq_scale = 1;
  std::vector<float> ff = {};  // empty: 1
  bool yarn = false;
  int orig_ctx = 0;
  double attn_factor = 1;
};

// Pair i of the first `dims` turns by theta = freq_scale * e with
// e = pos * base^(-2i/dims) / ff_i; with YaRN, theta = freq_scale * e * (1 - r)
// + e * r for the ramp r over the correction dims, and cos/sin scale by
// attn_factor * (1 + 0.1 ln(1 / freq_scale)) (the YaRN paper / ggml).
void RefRope(double* v, int dims, bool neox, int pos, double base, const RefRopeSpec& rs) {
  const double two_pi = 2 * 3.14159265358979323846;
  auto corr = [&](double beta) { return dims * std::log(rs.orig_ctx / (beta * two_pi)) / (2 * std::log(base)); };
  const double lo = std::max(0.0, std::floor(corr(32))), hi = std::min(dims - 1.0, std::ceil(corr(1)));
  const double mscale = rs.attn_factor * (rs.yarn ? 1 + 0.1 * std::log(1 / rs.freq_scale) : 1.0);
  for (int i = 0; i < dims / 2; ++i) {
    const double e = pos * std::pow(base, -2.0 * i / dims) / (rs.ff.empty() ? 1.0 : rs.ff[i]);
    const double r = rs.yarn ? 1 - std::clamp((i - lo) / std::max(0.001, hi - lo), 0.0, 1.0) : 0.0;
    const double theta = rs.freq_scale * e * (1 - r) + e * r;
    const int i0 = neox ? i : 2 * i, i1 = neox ? i + dims / 2 : 2 * i + 1;
    const double a = v[i0], b = v[i1];
    v[i0] = mscale * (a * std::cos(theta) - b * std::sin(theta));
    v[i1] = mscale * (a * std::sin(theta) + b * std::cos(theta));
  }
}

// Logits [T][V] of every position, by the textbook formulas.
std::vector<Vec> RefForward(const TinySpec& s, const TinyModel& m, const std::vector<int>& toks,
                            const RefRopeSpec& rs) {
  const int D = s.dim, hd = s.head_dim(), H = s.n_head, Hkv = s.n_kv, F = s.ffn, T = static_cast<int>(toks.size());
  const bool neox = s.arch == "qwen2";
  auto W = [&](const std::string& n) -> const std::vector<float>& { return m.w.at(n); };
  std::vector<Vec> x(T);
  for (int t = 0; t < T; ++t) x[t].assign(W("token_embd.weight").begin() + static_cast<size_t>(toks[t]) * D,
                                          W("token_embd.weight").begin() + static_cast<size_t>(toks[t] + 1) * D);
  for (int l = 0; l < s.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    std::vector<Vec> q(T), k(T), v(T);
    for (int t = 0; t < T; ++t) {
      Vec xn = RmsNorm(x[t], W(p + "attn_norm.weight"));
      q[t] = MatVec(W(p + "attn_q.weight"), H * hd, D, xn);
      k[t] = MatVec(W(p + "attn_k.weight"), Hkv * hd, D, xn);
      v[t] = MatVec(W(p + "attn_v.weight"), Hkv * hd, D, xn);
      if (s.qkv_bias()) {
        for (int i = 0; i < H * hd; ++i) q[t][i] += W(p + "attn_q.bias")[i];
        for (int i = 0; i < Hkv * hd; ++i) k[t][i] += W(p + "attn_k.bias")[i], v[t][i] += W(p + "attn_v.bias")[i];
      }
      for (int h = 0; h < H; ++h) RefRope(&q[t][h * hd], s.rope_dims, neox, t, s.base, rs);
      for (int h = 0; h < Hkv; ++h) RefRope(&k[t][h * hd], s.rope_dims, neox, t, s.base, rs);
    }
    for (int t = 0; t < T; ++t) {
      Vec att(H * hd, 0.0);
      for (int h = 0; h < H; ++h) {
        const int g = h / (H / Hkv);
        Vec sc(t + 1);
        double mx = -1e300, sum = 0;
        for (int u = 0; u <= t; ++u) {
          double d = 0;
          for (int i = 0; i < hd; ++i) d += q[t][h * hd + i] * k[u][g * hd + i];
          mx = std::max(mx, sc[u] = d / std::sqrt(static_cast<double>(hd)));
        }
        for (double& e : sc) sum += (e = std::exp(e - mx));
        for (int u = 0; u <= t; ++u)
          for (int i = 0; i < hd; ++i) att[h * hd + i] += sc[u] / sum * v[u][g * hd + i];
      }
      Vec o = MatVec(W(p + "attn_output.weight"), D, H * hd, att);
      for (int i = 0; i < D; ++i) x[t][i] += o[i];
      Vec xn = RmsNorm(x[t], W(p + "ffn_norm.weight"));
      Vec gt = MatVec(W(p + "ffn_gate.weight"), F, D, xn), up = MatVec(W(p + "ffn_up.weight"), F, D, xn);
      for (int i = 0; i < F; ++i) gt[i] = gt[i] / (1 + std::exp(-gt[i])) * up[i];
      Vec dn = MatVec(W(p + "ffn_down.weight"), D, F, gt);
      for (int i = 0; i < D; ++i) x[t][i] += dn[i];
    }
  }
  std::vector<Vec> logits(T);
  const std::string out = s.tied ? "token_embd.weight" : "output.weight";
  for (int t = 0; t < T; ++t) logits[t] = MatVec(W(out), m.vocab, D, RmsNorm(x[t], W("output_norm.weight")));
  return logits;
}

double MaxDiff(const std::vector<float>& got, const std::vector<Vec>& want) {
  double md = 0;
  const size_t V = want[0].size();
  for (size_t t = 0; t < want.size(); ++t)
    for (size_t i = 0; i < V; ++i) md = std::max(md, std::fabs(got[t * V + i] - want[t][i]));
  return md;
}

TinySpec Llama3Spec() {
  TinySpec s;  // as Llama 3.1 is published: rope_freqs, no scaling keys, untied output
  s.base = 10000.f;
  s.freq_factors = {1.f, 1.5f, 2.5f, 4.f, 8.f, 8.f};  // rope_dims 12 of head_dim 16
  s.file_type = 15;
  return s;
}

TinySpec Qwen2Spec() {
  TinySpec s;
  s.arch = "qwen2";
  s.base = 1000000.f;
  s.rope_dims = 8;
  s.factor = 4;  // no scaling.type: llama.cpp's default type, linear
  s.orig_ctx = 64;
  s.seed = 7;
  return s;
}

std::vector<int> Prompt() {
  std::vector<int> t = {1};
  for (int i = 0; i < 23; ++i) t.push_back(3 + (i * 37 + 11) % 500);
  return t;
}

// `wrong`: a reference the engine must NOT match (default: plain RoPE).
void CheckAgainstReference(const TinySpec& s, const RefRopeSpec& rs, const RefRopeSpec& wrong = {}) {
  TinyModel m = test::MakeTinyModel(s);
  const TempFile path_file = WriteTemp("kvtrim-tiny-" + s.arch + ".gguf", m.bytes);
  const std::string& path = path_file.path;
  auto e = Engine::Load({path, 2});
  ASSERT_TRUE(e.ok()) << e.error().message;
  const model::ModelConfig& c = e.value()->impl().config();
  EXPECT_FALSE(c.tied_embeddings);
  EXPECT_EQ(c.rope_dims, s.rope_dims);
  EXPECT_FLOAT_EQ(c.rope_freq_scale, static_cast<float>(rs.freq_scale));
  const std::vector<int> toks = Prompt();
  auto s1 = Session::Create(*e.value(), {});
  auto all = s1.value()->ForwardAll(toks);
  ASSERT_TRUE(all.ok()) << all.error().message;
  std::vector<Vec> want = RefForward(s, m, toks, rs);
  const double d = MaxDiff(all.value(), want), d_plain = MaxDiff(all.value(), RefForward(s, m, toks, wrong));
  // Measured max |diff|: 6.8e-7 (llama factors), 7.3e-7 (qwen2 linear),
  // 7.4e-7 (qwen2 yarn), 7.1e-7 (llama factors + linear); logits ~1.
  EXPECT_LT(d, 1e-5);
  // The check can fail: the wrong reference (no factors / no scaling; linear
  // for yarn) is 0.052, 0.165, 0.166 and 0.121 away.
  EXPECT_GT(d_plain, 1e-2);
  // Decode (one token at a time) gives the same last logits.
  auto s2 = Session::Create(*e.value(), {});
  ASSERT_TRUE(s2.value()->Prefill({toks.begin(), toks.end() - 3}).ok());
  for (size_t i = toks.size() - 3; i < toks.size(); ++i) ASSERT_TRUE(s2.value()->Decode(toks[i]).ok());
  EXPECT_LT(MaxDiff(s2.value()->logits(), {want.back()}), 1e-5);
}

TEST(Llama3, RopeFreqFactorsPartialRotaryUntiedOutputMatchReference) {
  CheckAgainstReference(Llama3Spec(), {1.0, Llama3Spec().freq_factors});
}
TEST(Llama3, Qwen2LinearScalingNeoxBiasesMatchReference) { CheckAgainstReference(Qwen2Spec(), {0.25}); }
TEST(Llama3, Qwen2YarnMatchesReference) {
  TinySpec s = Qwen2Spec();  // as Qwen2.5's YaRN GGUFs: type yarn, factor 4, original context
  s.scaling_type = "yarn";
  s.raw["qwen2.rope.scaling.attn_factor"] = {6, io::GgufWriter::Pod<float>(0.9f)};
  CheckAgainstReference(s, {0.25, {}, true, 64, 0.9f}, {0.25});  // and not as linear
}
TEST(Llama3, FreqFactorsWithLinearScalingMatchReference) {
  TinySpec s = Llama3Spec();  // both at once: theta = pos / 2 * base^(-2i/d) / ff_i
  s.scaling_type = "linear";
  s.factor = 2;
  s.orig_ctx = 128;
  CheckAgainstReference(s, {0.5, s.freq_factors});
}

// The models as published carry byte-level BPE vocabularies: the same
// shapes with real BPE vocabularies (GPT-2's 50257 tokens under the Llama 3
// and Qwen2 pre-tokenizers, ChatML control tokens appended) load, run and
// match the reference.
TinySpec WithBpeVocab(TinySpec s, const std::string& pre) {
  s.vocab_file = "vocab/ggml-vocab-gpt-2.gguf";
  s.raw["tokenizer.ggml.pre"] = {8, io::GgufWriter::Str(pre)};
  s.control_tokens = {"<|im_start|>", "<|im_end|>"};
  return s;
}
TEST(Llama3, BpeVocabularyLlama3AndQwen2ShapesMatchReference) {
  if (!std::filesystem::exists(test::SharedPath("vocab/ggml-vocab-gpt-2.gguf"))) GTEST_SKIP() << "no ../shared/vocab";
  CheckAgainstReference(WithBpeVocab(Llama3Spec(), "llama-bpe"), {1.0, Llama3Spec().freq_factors});
  CheckAgainstReference(WithBpeVocab(Qwen2Spec(), "qwen2"), {0.25});
}
TEST(Llama3, BpeQwen2ChatPromptTokenizesTheSpecialsAsTokens) {
  if (!std::filesystem::exists(test::SharedPath("vocab/ggml-vocab-gpt-2.gguf"))) GTEST_SKIP() << "no ../shared/vocab";
  TinySpec s = WithBpeVocab(Qwen2Spec(), "qwen2");
  s.raw["tokenizer.chat_template"] = {8, io::GgufWriter::Str(test::kQwen2Instruct)};
  s.raw["tokenizer.ggml.add_bos_token"] = {7, io::GgufWriter::Pod<uint8_t>(0)};
  const TempFile file = WriteTemp("kvtrim-tiny-qwen2-bpe.gguf", test::MakeTinyModel(s).bytes);
  auto e = Engine::Load({file.path, 2});
  ASSERT_TRUE(e.ok()) << e.error().message;
  const io::Tokenizer& tok = e.value()->impl().tokenizer();
  EXPECT_EQ(tok.model(), io::Tokenizer::Model::kByteLevelBpe);
  EXPECT_EQ(tok.vocab_size(), 50257 + 2);
  const int im_start = 50257, im_end = 50258;
  const ChatPrompt p = FormatChat(*e.value(), {{"user", "Hello world"}});
  EXPECT_EQ(p.family, ChatFamily::kChatML);
  EXPECT_EQ(p.text, "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello world<|im_end|>\n"
                    "<|im_start|>assistant\n");
  const std::vector<int> ids = tok.Encode(p.text, !p.has_bos && tok.add_bos(), p.parse_special);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), im_start) << "no BOS (add_bos_token false), the special first";
  EXPECT_EQ(std::count(ids.begin(), ids.end(), im_start), 3);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), im_end), 2);
  // Decode prints control tokens as nothing (llama.cpp's detokenize without special).
  EXPECT_EQ(tok.Decode(ids), "system\nYou are a helpful assistant.\nuser\nHello world\nassistant\n");
  // Without parse_special the markers are plain text (many tokens, none special).
  const std::vector<int> plain = tok.Encode(p.text, false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), im_start), 0);
  EXPECT_GT(plain.size(), ids.size());
  // The chat prompt runs through the model.
  auto sess = Session::Create(*e.value(), {});
  ASSERT_TRUE(sess.ok());
  ASSERT_TRUE(sess.value()->Prefill(ids).ok());
  EXPECT_EQ(static_cast<int>(sess.value()->logits().size()), 50257 + 2);
}

TEST(Llama3, RopeRotationHandComputed) {
  // head_dim 6, 4 rotated dims, base 100, linear factor 2 (freq scale 0.5),
  // factors {1, 4}, position 3: pair 0 turns by 0.5*3 = 1.5 rad, pair 1 by
  // 0.5*3*100^(-1/2)/4 = 0.0375 rad; dims 4, 5 stay.
  model::ModelConfig c;
  c.rope_dims = 4;
  c.rope_base = 100.f;
  c.rope_freq_scale = 0.5f;
  const double t0 = 1.5, t1 = 0.0375;
  for (auto mode : {kernels::RopeMode::kNormal, kernels::RopeMode::kNeox}) {
    c.rope_mode = mode;
    model::Rope rope(c, {1.f, 4.f});
    EXPECT_DOUBLE_EQ(rope.Theta(0, 3), t0);
    EXPECT_NEAR(rope.Theta(1, 3), t1, 1e-15);
    float x[6] = {1, 2, 3, 4, 5, 6};
    rope.Apply(x, 1, 6, 3);
    // normal: pairs (0,1), (2,3); neox: pairs (0,2), (1,3).
    const int a0 = 0, b0 = mode == kernels::RopeMode::kNormal ? 1 : 2;
    const int a1 = mode == kernels::RopeMode::kNormal ? 2 : 1, b1 = 3;
    const double in[6] = {1, 2, 3, 4, 5, 6};
    EXPECT_NEAR(x[a0], in[a0] * std::cos(t0) - in[b0] * std::sin(t0), 1e-6);
    EXPECT_NEAR(x[b0], in[a0] * std::sin(t0) + in[b0] * std::cos(t0), 1e-6);
    EXPECT_NEAR(x[a1], in[a1] * std::cos(t1) - in[b1] * std::sin(t1), 1e-6);
    EXPECT_NEAR(x[b1], in[a1] * std::sin(t1) + in[b1] * std::cos(t1), 1e-6);
    EXPECT_EQ(x[4], 5.f);
    EXPECT_EQ(x[5], 6.f);
  }
  // Neox, normal numbers: pair 0 of (1, 3) at 1.5 rad -> (cos1.5 - 3 sin1.5, sin1.5 + 3 cos1.5).
  c.rope_mode = kernels::RopeMode::kNeox;
  float y[6] = {1, 2, 3, 4, 5, 6};
  model::Rope(c, {1.f, 4.f}).Apply(y, 1, 6, 3);
  EXPECT_NEAR(y[0], -2.921748, 1e-5);
  EXPECT_NEAR(y[2], 1.209707, 1e-5);
}

TEST(Llama3, YarnRopeHandComputed) {
  // 8 rotated dims, base 1e4, factor 4, original context 64: the correction
  // dims are floor(8 ln(64/(32 2pi)) / (2 ln 1e4)) = floor(-0.497) -> 0 and
  // ceil(8 ln(64/(2pi)) / (2 ln 1e4)) = ceil(1.008) = 2, so the ramp is
  // 1, 0.5, 0, 0: at position 10 pair 0 keeps 10 rad (extrapolated), pair 1
  // 0.5 * 0.25 * 1 + 0.5 * 1 = 0.625, pair 2 0.25 * 0.1 = 0.025; cos/sin scale
  // by 1 + 0.1 ln 4.
  model::ModelConfig c;
  c.rope_dims = 8;
  c.rope_base = 1e4f;
  c.rope_scaling = "yarn";
  c.rope_freq_scale = 0.25f;
  c.rope_orig_ctx = 64;
  model::Rope rope(c, {});
  EXPECT_EQ(rope.corr_low(), 0.f);
  EXPECT_EQ(rope.corr_high(), 2.f);
  EXPECT_NEAR(rope.Theta(0, 10), 10.0, 1e-12);
  EXPECT_NEAR(rope.Theta(1, 10), 0.625, 1e-12);
  EXPECT_NEAR(rope.Theta(2, 10), 0.025, 1e-12);
  EXPECT_NEAR(rope.mscale(), 1.1386294361, 1e-9);
  float x[8] = {1, 0, 0, 0, 0, 0, 0, 0};
  rope.Apply(x, 1, 8, 10);
  EXPECT_NEAR(x[0], 1.1386294361 * std::cos(10.0), 1e-6);
  EXPECT_NEAR(x[1], 1.1386294361 * std::sin(10.0), 1e-6);
}

TEST(Llama3, ScalingTypeNoneIgnoresTheFactorAndFileTypeIsNamed) {
  TinySpec s = Llama3Spec();
  s.scaling_type = "none";
  s.factor = 8;
  auto f = io::GgufFile::FromBytes(test::MakeTinyModel(s).bytes);
  ASSERT_TRUE(f.ok());
  auto c = model::ReadConfig(*f.value());
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->rope_scaling, "none");
  EXPECT_EQ(c->rope_freq_scale, 1.f);
  EXPECT_TRUE(c->rope_freq_factors);
  EXPECT_EQ(model::FileTypeName(c->file_type), "MOSTLY_Q4_K_M (15)");
  EXPECT_EQ(model::FileTypeName(0), "ALL_F32 (0)");
  EXPECT_EQ(model::FileTypeName(18), "MOSTLY_Q6_K (18)");
  EXPECT_EQ(model::FileTypeName(5), "unknown (5)");
  EXPECT_EQ(model::FileTypeName(-1), "absent");
}

// Every wrong or missing key/tensor: the load fails with a message naming it.
TEST(Llama3, WrongOrMissingKeysGiveErrorsNamingThem) {
  using W = io::GgufWriter;
  struct Case {
    const char* what;
    std::function<void(TinySpec&)> edit;
    std::vector<std::string> expect;
  };
  const std::vector<Case> cases = {
      {"su", [](TinySpec& s) { s.scaling_type = "su"; }, {"llama.rope.scaling.type", "'su'"}},
      {"longrope", [](TinySpec& s) { s.scaling_type = "longrope"; }, {"llama.rope.scaling.type", "longrope"}},
      {"type not a string", [](TinySpec& s) { s.raw["llama.rope.scaling.type"] = {4, W::Pod<uint32_t>(1)}; },
       {"llama.rope.scaling.type", "expected a string"}},
      {"negative factor", [](TinySpec& s) { s.factor = -2; }, {"llama.rope.scaling.factor", "out of range"}},
      {"factor a string", [](TinySpec& s) { s.raw["llama.rope.scaling.factor"] = {8, W::Str("2")}; },
       {"llama.rope.scaling.factor", "expected a number"}},
      {"attn factor", [](TinySpec& s) { s.raw["llama.rope.scaling.attn_factor"] = {6, W::Pod<float>(-1.f)}; },
       {"llama.rope.scaling.attn_factor", "out of range"}},
      {"orig ctx", [](TinySpec& s) { s.raw["llama.rope.scaling.original_context_length"] = {5, W::Pod<int32_t>(-1)}; },
       {"llama.rope.scaling.original_context_length", "out of range"}},
      {"rope dims > head dim", [](TinySpec& s) { s.rope_dims = 18; s.freq_factors.clear(); },
       {"llama.rope.dimension_count", "18", "out of range"}},
      {"rope dims odd", [](TinySpec& s) { s.rope_dims = 11; s.freq_factors.clear(); },
       {"llama.rope.dimension_count", "11", "even"}},
      {"freq base", [](TinySpec& s) { s.base = 0.5f; }, {"llama.rope.freq_base"}},
      {"rope_freqs shape", [](TinySpec& s) { s.shapes["rope_freqs.weight"] = {4}; s.freq_factors.resize(4); },
       {"rope_freqs.weight", "[4]", "[6]"}},
      {"rope_freqs value", [](TinySpec& s) { s.freq_factors[2] = -1.f; }, {"rope_freqs.weight", "element 2"}},
      {"missing head count", [](TinySpec& s) { s.drop.insert("llama.attention.head_count"); },
       {"llama.attention.head_count"}},
      {"heads", [](TinySpec& s) { s.raw["llama.attention.head_count_kv"] = {4, W::Pod<uint32_t>(3)}; },
       {"llama.attention.head_count", "llama.attention.head_count_kv' = 3"}},
      {"key length", [](TinySpec& s) { s.raw["llama.attention.key_length"] = {4, W::Pod<uint32_t>(32)}; },
       {"llama.attention.key_length", "32", "not supported"}},
      {"vocab size", [](TinySpec& s) { s.raw["llama.vocab_size"] = {4, W::Pod<uint32_t>(500)}; },
       {"llama.vocab_size", "500", "512"}},
      {"missing eps", [](TinySpec& s) { s.drop.insert("llama.attention.layer_norm_rms_epsilon"); },
       {"llama.attention.layer_norm_rms_epsilon"}},
      {"file type", [](TinySpec& s) { s.raw["general.file_type"] = {8, W::Str("q4")}; }, {"general.file_type"}},
      {"missing output norm", [](TinySpec& s) { s.drop.insert("output_norm.weight"); }, {"output_norm.weight"}},
      {"output shape", [](TinySpec& s) { s.shapes["output.weight"] = {64, 500}; }, {"output.weight", "[64, 500]"}},
      {"qwen2 bias", [](TinySpec& s) { s = Qwen2Spec(); s.drop.insert("blk.1.attn_k.bias"); }, {"blk.1.attn_k.bias"}},
      {"qwen2 scaling", [](TinySpec& s) { s = Qwen2Spec(); s.scaling_type = "longrope"; }, {"qwen2.rope.scaling.type"}},
  };
  for (const Case& k : cases) {
    TinySpec s = Llama3Spec();
    k.edit(s);
    const TempFile path_file = WriteTemp("kvtrim-tiny-bad.gguf", test::MakeTinyModel(s).bytes);
    const std::string& path = path_file.path;
    auto e = Engine::Load({path, 1});
    ASSERT_FALSE(e.ok()) << k.what;
    for (const auto& want : k.expect)
      EXPECT_NE(e.error().message.find(want), std::string::npos) << k.what << ": " << e.error().message;
  }
}

TEST(Llama3, InspectShowsFileTypeAndRopeScaling) {
  const TempFile path_file = WriteTemp("kvtrim-tiny-inspect.gguf", test::MakeTinyModel(Llama3Spec()).bytes);
  const std::string& path = path_file.path;
  auto r = test::RunCommand(std::string(KVTRIM_CLI) + " inspect " + path + " 2>&1");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("file type MOSTLY_Q4_K_M (15)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rope_freqs factors yes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tied embeddings no"), std::string::npos) << r.out;
}

TEST(Llama3, RunChatFormatsWithTheModelsTemplate) {
  TinySpec s = Llama3Spec();
  s.raw["tokenizer.chat_template"] = {8, io::GgufWriter::Str(test::kLlama3Instruct)};
  const TempFile with_file = WriteTemp("kvtrim-tiny-chat.gguf", test::MakeTinyModel(s).bytes);
  const std::string& with = with_file.path;
  const TempFile without_file = WriteTemp("kvtrim-tiny-nochat.gguf", test::MakeTinyModel(Llama3Spec()).bytes);
  const std::string& without = without_file.path;
  const std::string cli = std::string(KVTRIM_CLI) + " run -n 3 --temp 0 --chat -p Hi -m ";
  auto r = test::RunCommand(cli + with + " --system 'Be brief.' 2>/dev/null");
  EXPECT_EQ(r.code, 0);
  // The SentencePiece vocabulary has no <|eot_id|> token yet: the specials are printed back as text.
  EXPECT_NE(r.out.find("<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
                       "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                       "<|start_header_id|>assistant<|end_header_id|>\n\n"),
            std::string::npos) << r.out;
  EXPECT_EQ(test::RunCommand(cli + with + " 2>&1 >/dev/null").out.find("warning"), std::string::npos);
  auto w = test::RunCommand(cli + without + " 2>&1");
  EXPECT_EQ(w.code, 0);
  EXPECT_NE(w.out.find("warning: the model has no chat template"), std::string::npos) << w.out;
  EXPECT_NE(w.out.find("user: Hi\nassistant:"), std::string::npos) << w.out;
  auto bad = test::RunCommand(std::string(KVTRIM_CLI) + " run -m " + without + " --system x -p Hi 2>&1");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("--system requires --chat"), std::string::npos) << bad.out;
  // The message from a file (-f), which excludes -p.
  const TempFile msg_file = WriteTemp("kvtrim-chat-msg.txt", "Hi");
  const std::string& msg = msg_file.path;
  auto f = test::RunCommand(cli.substr(0, cli.find(" -p Hi")) + " -f " + msg + " -m " + with + " --system 'Be brief.' 2>/dev/null");
  EXPECT_EQ(f.code, 0);
  EXPECT_EQ(f.out, r.out);
  auto both = test::RunCommand(cli + with + " -f " + msg + " 2>&1");
  EXPECT_NE(both.code, 0);
  EXPECT_NE(both.out.find("excludes"), std::string::npos) << both.out;
  auto missing = test::RunCommand(std::string(KVTRIM_CLI) + " run -m " + with + " -f /nonexistent.txt 2>&1");
  EXPECT_NE(missing.code, 0);
  EXPECT_NE(missing.out.find("cannot open prompt file '/nonexistent.txt'"), std::string::npos) << missing.out;
}

TEST(Llama3, GenerateStopsAtStopIdsUnlessIgnoringEos) {
  const TempFile file = WriteTemp("kvtrim-tiny-stop.gguf", test::MakeTinyModel(Llama3Spec()).bytes);
  auto e = Engine::Load({file.path, 1});
  ASSERT_TRUE(e.ok()) << e.error().message;
  auto first = [&](const std::vector<int>& stops, bool ignore_eos) {
    auto s = Session::Create(*e.value(), {});
    SamplingOptions so{0.f, 0.9f, 1, ignore_eos, stops};
    std::vector<int> out;
    auto st = Generate(*s.value(), Prompt(), 5, so, [&](int id) { out.push_back(id); });
    EXPECT_TRUE(st.ok());
    return out;
  };
  const std::vector<int> free_run = first({}, false);
  ASSERT_EQ(free_run.size(), 5u);
  EXPECT_TRUE(first({free_run[0]}, false).empty());                      // the first token is an end of turn
  // Stopping at the third token's id: the tokens before its first occurrence.
  const size_t until = std::find(free_run.begin(), free_run.end(), free_run[2]) - free_run.begin();
  EXPECT_EQ(first({free_run[2]}, false), std::vector<int>(free_run.begin(), free_run.begin() + until));
  EXPECT_EQ(first({free_run[0]}, true), free_run);                       // --ignore-eos keeps going
}

// ---- sampling on a large vocabulary --------------------------------------
// (the chain against its reference on random logits: sampler_test.cpp)

TEST(Llama3, LargeVocabularyModelDecodesGreedyAsArgmax) {
  TinySpec s = Llama3Spec();
  s.vocab = 128256;
  s.n_layer = 1;
  s.tied = true;
  TinyModel m = test::MakeTinyModel(s);
  // Kept in the temp dir: `kvtrim run` is timed on it (docs/llama3.md).
  const TempFile path_file = WriteTemp("kvtrim-llama3-128k.gguf", m.bytes, /*keep=*/true);
  const std::string& path = path_file.path;
  auto e = Engine::Load({path, 2});
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_EQ(e.value()->impl().config().vocab, 128256);
  auto sess = Session::Create(*e.value(), {});
  ASSERT_TRUE(sess.value()->Prefill(Prompt()).ok());
  Sampler greedy({0.f, 0.9f, 1}), nucleus({0.8f, 0.9f, 3});
  for (int step = 0; step < 4; ++step) {
    const auto& lg = sess.value()->logits();
    const int g = greedy.Sample(lg);
    EXPECT_EQ(g, static_cast<int>(std::max_element(lg.begin(), lg.end()) - lg.begin()));
    EXPECT_EQ(nucleus.Sample(lg), test::ReferenceSample(lg, {0.8f, 0.9f, 3}, {}, test::DrawOf(3, step)));
    ASSERT_TRUE(sess.value()->Decode(g).ok());
  }
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim
