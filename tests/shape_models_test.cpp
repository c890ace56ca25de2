// `kvtrim make-model` (model/shape_models.h): files at the published shapes of
// real models, with noise weights, loaded back through the project's reader,
// tokenizer and engine; the GGUF writer's streaming and atomic writes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <tuple>
#include <unistd.h>

#include "engine/engine_impl.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "io/tokenizer.h"
#include "model/config.h"
#include "model/shape_models.h"
#include "model/synthetic_vocab.h"
#include "test_util.h"

namespace kvtrim {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

namespace fs = std::filesystem;

std::string TempPath(const std::string& name) {
  return (fs::temp_directory_path() / ("kvtrim_shape_" + std::to_string(::getpid()) + "_" + name)).string();
}

std::string BuildBytes(const model::ShapeModelOptions& o) {
  auto w = model::BuildShapeModel(o);
  EXPECT_TRUE(w.ok()) << w.error().message;
  if (!w.ok()) return {};
  auto b = w->Build();
  EXPECT_TRUE(b.ok()) << b.error().message;
  return b.ok() ? b.value() : std::string();
}

TEST(ShapeModels, TableHoldsThePublishedConfigs) {
  ASSERT_EQ(model::ModelShapes().size(), 3u);
  const model::ModelShape* s = model::FindModelShape("smollm2-135m");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(std::string(s->arch), "llama");
  EXPECT_EQ(std::vector<int>({s->dim, s->n_layer, s->n_head, s->n_kv, s->head_dim, s->ffn, s->vocab, s->ctx}),
            std::vector<int>({576, 30, 9, 3, 64, 1536, 49152, 8192}));
  EXPECT_EQ(s->rope_base, 100000.f);
  EXPECT_EQ(s->rms_eps, 1e-5f);
  const model::ModelShape* q = model::FindModelShape("qwen2.5-0.5b");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(std::string(q->arch), "qwen2");
  EXPECT_EQ(std::vector<int>({q->dim, q->n_layer, q->n_head, q->n_kv, q->head_dim, q->ffn, q->vocab, q->ctx}),
            std::vector<int>({896, 24, 14, 2, 64, 4864, 151936, 32768}));
  EXPECT_EQ(q->rope_base, 1000000.f);
  EXPECT_EQ(q->rms_eps, 1e-6f);
  EXPECT_TRUE(q->qkv_bias);
  const model::ModelShape* l = model::FindModelShape("llama3.2-1b");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(std::vector<int>({l->dim, l->n_layer, l->n_head, l->n_kv, l->head_dim, l->ffn, l->vocab, l->ctx}),
            std::vector<int>({2048, 16, 32, 8, 64, 8192, 128256, 131072}));
  EXPECT_EQ(l->rope_base, 500000.f);
  EXPECT_EQ(l->rope_factor, 32.f);
  EXPECT_EQ(l->rope_orig_ctx, 8192);
  EXPECT_EQ(model::FindModelShape("gpt2"), nullptr);
}

// Llama 3's factors: 1 for the high frequencies, 32 (the factor) for the low
// ones, a smooth ramp between; Llama-3.2-1B's rope_freqs.weight has 32 of them.
TEST(ShapeModels, Llama3RopeFactorsFollowTheConverter) {
  const std::vector<float> f = model::Llama3RopeFactors(*model::FindModelShape("llama3.2-1b"));
  ASSERT_EQ(f.size(), 32u);
  EXPECT_EQ(f.front(), 1.f);
  EXPECT_EQ(f.back(), 32.f);
  for (size_t i = 1; i < f.size(); ++i) EXPECT_GE(f[i], f[i - 1]) << i;
  int ramp = 0;
  for (float x : f) ramp += x > 1.f && x < 32.f;
  EXPECT_GT(ramp, 0);
}

// Every shape at a few layers: the reader sees the published hyperparameters
// (only block_count differs), the tensor types and shapes, the description.
TEST(ShapeModels, FilesLoadWithThePublishedShapes) {
  for (const auto& [name, type, gtype] : {std::tuple{"smollm2-135m", "q8_0", GgmlType::Q8_0},
                                          std::tuple{"qwen2.5-0.5b", "q4_0", GgmlType::Q4_0},
                                          std::tuple{"llama3.2-1b", "q4_0", GgmlType::Q4_0}}) {
    SCOPED_TRACE(name);
    const model::ModelShape& s = *model::FindModelShape(name);
    auto f = io::GgufFile::FromBytes(BuildBytes({name, type, 7, 1}));
    ASSERT_TRUE(f.ok()) << f.error().message;
    auto c = model::ReadConfig(*f.value());
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_EQ(c->arch, s.arch);
    EXPECT_EQ(c->n_layer, 1);
    EXPECT_EQ(std::vector<int>({c->dim, c->n_head, c->n_head_kv, c->head_dim, c->ffn_dim, c->vocab, c->ctx}),
              std::vector<int>({s.dim, s.n_head, s.n_kv, s.head_dim, s.ffn, s.vocab, s.ctx}));
    EXPECT_EQ(c->rope_base, s.rope_base);
    EXPECT_EQ(c->rms_eps, s.rms_eps);
    EXPECT_EQ(c->rope_dims, s.head_dim);
    EXPECT_TRUE(c->tied_embeddings);
    EXPECT_EQ(c->qkv_bias, s.qkv_bias);
    EXPECT_EQ(c->rope_freq_factors, s.rope_factor > 0);
    EXPECT_EQ(c->file_type, model::ShapeModelFileType(gtype));
    const io::GgufFile& g = *f.value();
    EXPECT_NE(g.GetString("general.description").value().find("noise"), std::string::npos);
    EXPECT_EQ(g.GetString("general.name").value(), std::string("kvtrim shape model ") + name);
    auto t = [&](const char* n) { return g.FindTensor(n); };
    ASSERT_NE(t("token_embd.weight"), nullptr);
    EXPECT_EQ(t("token_embd.weight")->type, gtype);
    EXPECT_EQ(t("blk.0.ffn_down.weight")->type, gtype);
    EXPECT_EQ(t("blk.0.ffn_down.weight")->shape, std::vector<uint64_t>({uint64_t(s.ffn), uint64_t(s.dim)}));
    EXPECT_EQ(t("blk.0.attn_k.weight")->shape, std::vector<uint64_t>({uint64_t(s.dim), uint64_t(s.n_kv * 64)}));
    EXPECT_EQ(t("blk.0.attn_norm.weight")->type, GgmlType::F32);
    EXPECT_EQ(t("output_norm.weight")->type, GgmlType::F32);
    EXPECT_EQ(t("output.weight"), nullptr);
    EXPECT_EQ(t("blk.0.attn_q.bias") != nullptr, s.qkv_bias);
    EXPECT_EQ(t("rope_freqs.weight") != nullptr, s.rope_factor > 0);
    auto tok = io::Tokenizer::FromGguf(g);
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    EXPECT_EQ(tok->vocab_size(), s.vocab);
    EXPECT_EQ(tok->n_byte_tokens(), 256);
  }
}

TEST(ShapeModels, OneSeedGivesOneFileAnotherSeedAnother) {
  const std::string a = BuildBytes({"smollm2-135m", "q4_0", 1, 2}), b = BuildBytes({"smollm2-135m", "q4_0", 1, 2});
  const std::string c = BuildBytes({"smollm2-135m", "q4_0", 2, 2});
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(std::hash<std::string>{}(a), std::hash<std::string>{}(b));
  EXPECT_TRUE(a == b);
  // Another seed: other weights (not only the seed's metadata key).
  auto fa = io::GgufFile::FromBytes(a), fc = io::GgufFile::FromBytes(c);
  ASSERT_TRUE(fa.ok() && fc.ok());
  for (const char* name : {"token_embd.weight", "blk.1.ffn_down.weight"}) {
    const io::GgufTensorInfo *ta = fa.value()->FindTensor(name), *tc = fc.value()->FindTensor(name);
    ASSERT_TRUE(ta && tc && ta->n_bytes == tc->n_bytes);
    EXPECT_NE(std::memcmp(ta->data, tc->data, ta->n_bytes), 0) << name;
  }
  EXPECT_EQ(fc.value()->GetInt("kvtrim.shape_model.seed").value(), 2);
  // The streamed file holds the same bytes as the in-memory build.
  const std::string path = TempPath("seed.gguf");
  auto w = model::BuildShapeModel({"smollm2-135m", "q4_0", 1, 2});
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(w->WriteFile(path).ok());
  EXPECT_EQ(w->file_bytes(), a.size());
  EXPECT_TRUE(test::ReadFile(path) == a);
  fs::remove(path);
}

TEST(ShapeModels, PlainEnglishTokenizesWithoutUnknowns) {
  auto v = model::MakeSyntheticVocab(49152);
  ASSERT_TRUE(v.ok());
  io::GgufWriter w;
  w.AddString("tokenizer.ggml.model", "llama");
  w.AddStringArray("tokenizer.ggml.tokens", v->tokens);
  w.AddF32Array("tokenizer.ggml.scores", v->scores);
  w.AddI32Array("tokenizer.ggml.token_type", v->types);
  auto f = io::GgufFile::FromBytes(w.Bytes());
  ASSERT_TRUE(f.ok()) << f.error().message;
  auto tok = io::Tokenizer::FromGguf(*f.value());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  const std::string text = "The quick brown fox jumps over the lazy dog. Hello, World! 42 \xC3\xA9t\xC3\xA9";
  const std::vector<int> ids = tok->Encode(text, true);
  EXPECT_EQ(ids.front(), model::SyntheticVocab::kBos);
  EXPECT_LT(ids.size(), text.size());  // pieces merged
  for (int id : ids) EXPECT_NE(id, model::SyntheticVocab::kUnk);
  EXPECT_EQ(tok->Decode(ids), text);
  EXPECT_FALSE(model::MakeSyntheticVocab(100).ok());
}

TEST(ShapeModels, BadShapeTypeOrLayersAreErrors) {
  auto bad_shape = model::BuildShapeModel({"llama-7b", "q4_0", 1, 0});
  ASSERT_FALSE(bad_shape.ok());
  EXPECT_NE(bad_shape.error().message.find("unknown shape 'llama-7b'"), std::string::npos);
  EXPECT_NE(bad_shape.error().message.find("smollm2-135m"), std::string::npos);
  auto bad_type = model::BuildShapeModel({"smollm2-135m", "q5_k", 1, 0});
  ASSERT_FALSE(bad_type.ok());
  EXPECT_NE(bad_type.error().message.find("unknown weight type 'q5_k'"), std::string::npos);
  EXPECT_FALSE(model::BuildShapeModel({"smollm2-135m", "q4_0", 1, -1}).ok());
}

// A failed write leaves neither a partial file nor a changed file at the path.
TEST(GgufWriterFile, FailedWritesLeaveThePathAsItWas) {
  const std::string path = TempPath("atomic.gguf");
  {
    std::ofstream(path) << "old";
  }
  io::GgufWriter w;
  w.AddString("general.architecture", "llama");
  ASSERT_TRUE(w.AddTensor("t", {32}, GgmlType::F32,
                          [](const io::GgufWriter::Sink& sink) -> Status {
                            std::string half(64, 'x');
                            KVTRIM_RETURN_IF_ERROR(sink(half.data(), half.size()));
                            return MakeError("interrupted");
                          })
                  .ok());
  Status st = w.WriteFile(path);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "interrupted");
  EXPECT_EQ(test::ReadFile(path), "old");
  EXPECT_FALSE(fs::exists(path + ".partial"));
  // A producer that writes too few bytes is caught.
  io::GgufWriter s;
  ASSERT_TRUE(s.AddTensor("t", {32}, GgmlType::F32, [](const io::GgufWriter::Sink&) { return Status{}; }).ok());
  EXPECT_NE(s.WriteFile(path).message().find("wrote 0 of 128 bytes"), std::string::npos);
  EXPECT_EQ(test::ReadFile(path), "old");
  // A Q4_0 row must hold whole blocks; an unwritable path is an error.
  EXPECT_FALSE(s.AddTensor("q", {48}, GgmlType::Q4_0, [](const io::GgufWriter::Sink&) { return Status{}; }).ok());
  EXPECT_NE(w.WriteFile("/nonexistent-dir/x.gguf").message().find("cannot write"), std::string::npos);
  fs::remove(path);
}

// The full SmolLM2-135M shape (30 layers, Q4_0, ~90 MB): the engine loads it,
// plain English tokenizes, prefill and a decode step give finite logits.
TEST(ShapeModels, EngineRunsTheFullSmolLM2Shape) {
  const std::string path = TempPath("smollm2.gguf");
  auto w = model::BuildShapeModel({"smollm2-135m", "q4_0", 3, 0});
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(w->WriteFile(path).ok());
  auto e = Engine::Load({path, 2});
  ASSERT_TRUE(e.ok()) << e.error().message;
  const model::ModelConfig& c = e.value()->impl().config();
  EXPECT_EQ(c.n_layer, 30);
  EXPECT_EQ(c.vocab, 49152);
  const std::vector<int> ids = e.value()->impl().tokenizer().Encode("Once upon a time there was a little cat", true);
  auto s = Session::Create(*e.value(), {});
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(s.value()->Prefill(ids).ok());
  for (int step = 0; step < 2; ++step) {
    const std::vector<float>& lg = s.value()->logits();
    ASSERT_EQ(lg.size(), 49152u);
    double sum2 = 0;
    for (float x : lg) {
      ASSERT_TRUE(std::isfinite(x));
      sum2 += double{x} * x;
    }
    EXPECT_GT(sum2, 0);
    int best = 0;
    for (int i = 1; i < 49152; ++i) best = lg[i] > lg[best] ? i : best;
    ASSERT_TRUE(s.value()->Decode(best).ok());
  }
  fs::remove(path);
}

TEST(ShapeModels, CliWritesAndRefuses) {
  const std::string path = TempPath("cli.gguf");
  auto ok = test::RunCommand(std::string(KVTRIM_CLI) + " make-model --shape qwen2.5-0.5b --type q8_0 --layers 1 -q --out " +
                             path + " 2>&1");
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_NE(ok.out.find("weights are noise"), std::string::npos) << ok.out;
  auto ins = test::RunCommand(std::string(KVTRIM_CLI) + " inspect " + path + " 2>&1");
  EXPECT_EQ(ins.code, 0) << ins.out;
  EXPECT_NE(ins.out.find("dim 896, layers 1, heads 14, kv heads 2"), std::string::npos) << ins.out;
  auto bad = test::RunCommand(std::string(KVTRIM_CLI) + " make-model --shape nope --out " + path + " 2>&1");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.out.find("unknown shape 'nope'"), std::string::npos) << bad.out;
  auto help = test::RunCommand(std::string(KVTRIM_CLI) + " make-model --help 2>&1");
  EXPECT_NE(help.out.find("NOISE"), std::string::npos) << help.out;
  fs::remove(path);
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim
