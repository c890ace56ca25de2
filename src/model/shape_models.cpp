#include "model/shape_models.h"

#include <cmath>

#include "model/noise_weights.h"
#include "model/synthetic_vocab.h"

namespace kvtrim::model {
namespace {

// The Hugging Face config.json of each model (hidden_size, num_hidden_layers,
// num_attention_heads, num_key_value_heads, head_dim, intermediate_size,
// vocab_size, max_position_embeddings, rope_theta, rms_norm_eps; all three tie
// their embeddings; Qwen2 has q/k/v biases; Llama 3.2's rope_scaling).
const std::vector<ModelShape> kShapes = {
    {"smollm2-135m", "HuggingFaceTB/SmolLM2-135M", "llama", 576, 30, 9, 3, 64, 1536, 49152, 8192, 100000.f, 1e-5f,
     false, 0, 0, 0, 0},
    {"qwen2.5-0.5b", "Qwen/Qwen2.5-0.5B", "qwen2", 896, 24, 14, 2, 64, 4864, 151936, 32768, 1000000.f, 1e-6f, true,
     0, 0, 0, 0},
    {"llama3.2-1b", "meta-llama/Llama-3.2-1B", "llama", 2048, 16, 32, 8, 64, 8192, 128256, 131072, 500000.f, 1e-5f,
     false, 32.f, 1.f, 4.f, 8192},
};

constexpr float kWeightStd = 0.02f;  // matrices, embeddings and biases; norms are 1

void AddMetadata(const ModelShape& s, int n_layer, GgmlType type, const ShapeModelOptions& o, io::GgufWriter* w) {
  const std::string a = std::string(s.arch) + ".";
  w->AddString("general.architecture", s.arch);
  w->AddString("general.name", std::string("kvtrim shape model ") + s.name);
  w->AddString("general.description", ShapeModelDescription());
  w->AddString("general.source.url", std::string("https://huggingface.co/") + s.hf_id + " (configuration only)");
  w->AddU32("general.file_type", static_cast<uint32_t>(ShapeModelFileType(type)));
  w->AddU32("general.quantization_version", 2);
  w->AddString("kvtrim.shape_model.shape", s.name);
  w->AddU64("kvtrim.shape_model.seed", o.seed);
  w->AddU32(a + "context_length", static_cast<uint32_t>(s.ctx));
  w->AddU32(a + "embedding_length", static_cast<uint32_t>(s.dim));
  w->AddU32(a + "block_count", static_cast<uint32_t>(n_layer));
  w->AddU32(a + "feed_forward_length", static_cast<uint32_t>(s.ffn));
  w->AddU32(a + "attention.head_count", static_cast<uint32_t>(s.n_head));
  w->AddU32(a + "attention.head_count_kv", static_cast<uint32_t>(s.n_kv));
  w->AddF32(a + "attention.layer_norm_rms_epsilon", s.rms_eps);
  w->AddF32(a + "rope.freq_base", s.rope_base);
  w->AddU32(a + "rope.dimension_count", static_cast<uint32_t>(s.head_dim));
  w->AddU32(a + "vocab_size", static_cast<uint32_t>(s.vocab));
}

Status AddVocab(const ModelShape& s, io::GgufWriter* w) {
  auto v = MakeSyntheticVocab(s.vocab);
  if (!v.ok()) return v.error();
  w->AddString("tokenizer.ggml.model", "llama");
  w->AddStringArray("tokenizer.ggml.tokens", v->tokens);
  w->AddF32Array("tokenizer.ggml.scores", v->scores);
  w->AddI32Array("tokenizer.ggml.token_type", v->types);
  w->AddU32("tokenizer.ggml.unknown_token_id", SyntheticVocab::kUnk);
  w->AddU32("tokenizer.ggml.bos_token_id", SyntheticVocab::kBos);
  w->AddU32("tokenizer.ggml.eos_token_id", SyntheticVocab::kEos);
  w->AddBool("tokenizer.ggml.add_bos_token", true);
  w->AddBool("tokenizer.ggml.add_eos_token", false);
  return {};
}

Status AddTensors(const ModelShape& s, int n_layer, GgmlType type, uint64_t seed, io::GgufWriter* w) {
  const int D = s.dim, F = s.ffn, Q = s.n_head * s.head_dim, K = s.n_kv * s.head_dim;
  const NoiseSpec noise{seed, kWeightStd, 0.f, false}, ones{seed, 0.f, 1.f, true};
  auto add = [&](const std::string& name, int cols, uint64_t rows, GgmlType t, const NoiseSpec& ns) -> Status {
    const std::vector<uint64_t> shape = rows == 1 ? std::vector<uint64_t>{static_cast<uint64_t>(cols)}
                                                  : std::vector<uint64_t>{static_cast<uint64_t>(cols), rows};
    return w->AddTensor(name, shape, t, NoiseProducer(ns, name, rows, cols, t));
  };
  KVTRIM_RETURN_IF_ERROR(add("token_embd.weight", D, static_cast<uint64_t>(s.vocab), type, noise));
  if (s.rope_factor > 0) {
    std::vector<float> f = Llama3RopeFactors(s);
    std::string bytes(reinterpret_cast<const char*>(f.data()), f.size() * sizeof(float));
    w->AddTensor("rope_freqs.weight", {f.size()}, GgmlType::F32, std::move(bytes));
  }
  for (int l = 0; l < n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    KVTRIM_RETURN_IF_ERROR(add(p + "attn_norm.weight", D, 1, GgmlType::F32, ones));
    KVTRIM_RETURN_IF_ERROR(add(p + "attn_q.weight", D, static_cast<uint64_t>(Q), type, noise));
    KVTRIM_RETURN_IF_ERROR(add(p + "attn_k.weight", D, static_cast<uint64_t>(K), type, noise));
    KVTRIM_RETURN_IF_ERROR(add(p + "attn_v.weight", D, static_cast<uint64_t>(K), type, noise));
    if (s.qkv_bias) {
      KVTRIM_RETURN_IF_ERROR(add(p + "attn_q.bias", Q, 1, GgmlType::F32, noise));
      KVTRIM_RETURN_IF_ERROR(add(p + "attn_k.bias", K, 1, GgmlType::F32, noise));
      KVTRIM_RETURN_IF_ERROR(add(p + "attn_v.bias", K, 1, GgmlType::F32, noise));
    }
    KVTRIM_RETURN_IF_ERROR(add(p + "attn_output.weight", Q, static_cast<uint64_t>(D), type, noise));
    KVTRIM_RETURN_IF_ERROR(add(p + "ffn_norm.weight", D, 1, GgmlType::F32, ones));
    KVTRIM_RETURN_IF_ERROR(add(p + "ffn_gate.weight", D, static_cast<uint64_t>(F), type, noise));
    KVTRIM_RETURN_IF_ERROR(add(p + "ffn_up.weight", D, static_cast<uint64_t>(F), type, noise));
    KVTRIM_RETURN_IF_ERROR(add(p + "ffn_down.weight", F, static_cast<uint64_t>(D), type, noise));
  }
  return add("output_norm.weight", D, 1, GgmlType::F32, ones);
}

}  // namespace

const std::vector<ModelShape>& ModelShapes() { return kShapes; }

const ModelShape* FindModelShape(const std::string& name) {
  for (const ModelShape& s : kShapes)
    if (name == s.name) return &s;
  return nullptr;
}

Expected<GgmlType> ParseShapeModelType(const std::string& name) {
  if (name == "f16") return GgmlType::F16;
  if (name == "q8_0") return GgmlType::Q8_0;
  if (name == "q4_0") return GgmlType::Q4_0;
  return MakeError("unknown weight type '" + name + "' (supported: f16, q8_0, q4_0)");
}

int ShapeModelFileType(GgmlType t) {
  switch (t) {
    case GgmlType::F16: return 1;   // MOSTLY_F16
    case GgmlType::Q4_0: return 2;  // MOSTLY_Q4_0
    case GgmlType::Q8_0: return 7;  // MOSTLY_Q8_0
    default: return 0;              // ALL_F32
  }
}

std::vector<float> Llama3RopeFactors(const ModelShape& s) {
  std::vector<float> out;
  const double low_wavelen = s.rope_orig_ctx / s.low_freq_factor, high_wavelen = s.rope_orig_ctx / s.high_freq_factor;
  for (int i = 0; i < s.head_dim; i += 2) {
    const float freq = 1.f / std::pow(s.rope_base, static_cast<float>(i) / static_cast<float>(s.head_dim));
    const double wavelen = 2 * M_PI / freq;
    if (wavelen < high_wavelen) {
      out.push_back(1.f);
    } else if (wavelen > low_wavelen) {
      out.push_back(s.rope_factor);
    } else {
      const double smooth = (s.rope_orig_ctx / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      out.push_back(static_cast<float>(1.0 / ((1 - smooth) / s.rope_factor + smooth)));
    }
  }
  return out;
}

std::string ShapeModelDescription() {
  return "kvtrim shape model: the published configuration of a real model with seeded random weights (noise) and a "
         "synthetic vocabulary of the real size. For speed and memory measurements only, never for quality: its "
         "outputs mean nothing.";
}

Expected<io::GgufWriter> BuildShapeModel(const ShapeModelOptions& o) {
  const ModelShape* s = FindModelShape(o.shape);
  if (!s) return MakeError("unknown shape '" + o.shape + "' (supported: " + ModelShapeNames() + ")");
  auto type = ParseShapeModelType(o.type);
  if (!type.ok()) return type.error();
  if (o.layers < 0 || o.layers > 1024) {
    return MakeError("layer count " + std::to_string(o.layers) + " is out of range [1, 1024] (0: the published " +
                     std::to_string(s->n_layer) + ")");
  }
  const int n_layer = o.layers > 0 ? o.layers : s->n_layer;
  io::GgufWriter w;
  AddMetadata(*s, n_layer, type.value(), o, &w);
  KVTRIM_RETURN_IF_ERROR(AddVocab(*s, &w));
  KVTRIM_RETURN_IF_ERROR(AddTensors(*s, n_layer, type.value(), o.seed, &w));
  return w;
}

}  // namespace kvtrim::model
