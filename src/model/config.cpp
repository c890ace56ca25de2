#include "model/config.h"

#include <cmath>
#include <iterator>

namespace kvtrim::model {
namespace {

// Architectures we run and how they differ from plain llama.
struct ArchInfo {
  const char* name;
  kernels::RopeMode rope;
  bool qkv_bias;
};
constexpr ArchInfo kArchs[] = {
    {"llama", kernels::RopeMode::kNormal, false},
    {"qwen2", kernels::RopeMode::kNeox, true},
};

// The {arch}.rope.* keys after the dimension count: base, scaling type and
// factor (llama.cpp's defaults: type linear, factor 1; the old key
// rope.scale_linear stands for the factor), original context (YaRN's
// correction range; default the trained context), attn factor.
Status ReadRope(const io::GgufFile& f, const std::string& p, ModelConfig* c) {
  if (f.Find(p + "rope.freq_base")) {
    auto b = f.GetFloat(p + "rope.freq_base");
    if (!b.ok()) return b.error();
    if (!(b.value() > 1.0)) {
      return MakeError("key '" + p + "rope.freq_base' = " + std::to_string(b.value()) + " must be > 1");
    }
    c->rope_base = static_cast<float>(b.value());
  }
  std::string type = "linear";
  if (f.Find(p + "rope.scaling.type")) {
    auto t = f.GetString(p + "rope.scaling.type");
    if (!t.ok()) return t.error();
    type = t.value();
    if (type != "none" && type != "linear" && type != "yarn") {
      return MakeError("key '" + p + "rope.scaling.type' = '" + type +
                       "' is not supported (supported: none, linear, yarn)");
    }
  }
  double factor = 0;
  for (const char* key : {"rope.scaling.factor", "rope.scale_linear"}) {
    if (!f.Find(p + key)) continue;
    auto v = f.GetFloat(p + key);
    if (!v.ok()) return v.error();
    if (!(v.value() >= 0 && v.value() <= 1e6)) {
      return MakeError("key '" + p + key + "' = " + std::to_string(v.value()) + " is out of range [0, 1e6]");
    }
    factor = v.value();
    break;
  }
  c->rope_scaling = type == "yarn" ? "yarn" : type == "none" || factor == 0 || factor == 1 ? "none" : "linear";
  c->rope_freq_scale = type != "none" && factor != 0 ? static_cast<float>(1.0 / factor) : 1.f;
  c->rope_orig_ctx = c->ctx;  // llama.cpp's n_ctx_orig_yarn default: the trained context
  c->trained_ctx = c->ctx;
  if (f.Find(p + "rope.scaling.original_context_length")) {
    auto v = f.GetInt(p + "rope.scaling.original_context_length");
    if (!v.ok()) return v.error();
    if (v.value() < 1 || v.value() > (1 << 24)) {
      return MakeError("key '" + p + "rope.scaling.original_context_length' = " + std::to_string(v.value()) +
                       " is out of range [1, 16777216]");
    }
    c->rope_orig_ctx = static_cast<int>(v.value());
  }
  if (f.Find(p + "rope.scaling.attn_factor")) {
    auto v = f.GetFloat(p + "rope.scaling.attn_factor");
    if (!v.ok()) return v.error();
    if (!(v.value() > 0 && v.value() <= 1e3)) {
      return MakeError("key '" + p + "rope.scaling.attn_factor' = " + std::to_string(v.value()) +
                       " is out of range (0, 1000]");
    }
    c->rope_attn_factor = static_cast<float>(v.value());
  }
  c->rope_freq_factors = f.FindTensor("rope_freqs.weight") != nullptr;
  return {};
}

// llama.cpp's include/llama.h enum llama_ftype (removed values left empty).
constexpr const char* kFileTypes[] = {
    "ALL_F32",         "MOSTLY_F16",     "MOSTLY_Q4_0",     "MOSTLY_Q4_1",    "MOSTLY_Q4_1_SOME_F16",
    nullptr,           nullptr,          "MOSTLY_Q8_0",     "MOSTLY_Q5_0",    "MOSTLY_Q5_1",
    "MOSTLY_Q2_K",     "MOSTLY_Q3_K_S",  "MOSTLY_Q3_K_M",   "MOSTLY_Q3_K_L",  "MOSTLY_Q4_K_S",
    "MOSTLY_Q4_K_M",   "MOSTLY_Q5_K_S",  "MOSTLY_Q5_K_M",   "MOSTLY_Q6_K",    "MOSTLY_IQ2_XXS",
    "MOSTLY_IQ2_XS",   "MOSTLY_Q2_K_S",  "MOSTLY_IQ3_XS",   "MOSTLY_IQ3_XXS", "MOSTLY_IQ1_S",
    "MOSTLY_IQ4_NL",   "MOSTLY_IQ3_S",   "MOSTLY_IQ3_M",    "MOSTLY_IQ2_S",   "MOSTLY_IQ2_M",
    "MOSTLY_IQ4_XS",   "MOSTLY_IQ1_M",   "MOSTLY_BF16",     nullptr,          nullptr,
    nullptr,           "MOSTLY_TQ1_0",   "MOSTLY_TQ2_0",
};

Status ReadFileType(const io::GgufFile& f, ModelConfig* c) {
  if (!f.Find("general.file_type")) return {};
  auto ft = f.GetInt("general.file_type");
  if (!ft.ok()) return ft.error();
  if (ft.value() < 0 || ft.value() > 1024) {
    return MakeError("key 'general.file_type' = " + std::to_string(ft.value()) + " is out of range [0, 1024]");
  }
  c->file_type = static_cast<int>(ft.value());
  return {};
}

}  // namespace

std::string FileTypeName(int file_type) {
  if (file_type < 0) return "absent";
  const char* name = nullptr;
  if (file_type < static_cast<int>(std::size(kFileTypes))) name = kFileTypes[file_type];
  if (file_type == 1024) name = "GUESSED";
  return std::string(name ? name : "unknown") + " (" + std::to_string(file_type) + ")";
}

Expected<ModelConfig> ReadConfig(const io::GgufFile& f) {
  ModelConfig c;
  auto arch = f.GetString("general.architecture");
  if (!arch.ok()) return arch.error();
  c.arch = arch.value();
  const ArchInfo* info = nullptr;
  for (const auto& a : kArchs)
    if (c.arch == a.name) info = &a;
  if (!info) return MakeError("unsupported architecture '" + c.arch + "' (supported: llama, qwen2)");
  c.rope_mode = info->rope;
  c.qkv_bias = info->qkv_bias;
  if (auto n = f.GetString("general.name"); n.ok()) c.name = n.value();

  const std::string p = c.arch + ".";
  auto geti = [&](const std::string& key, int* out, int lo, int hi) -> Status {
    auto v = f.GetInt(p + key);
    if (!v.ok()) return v.error();
    if (v.value() < lo || v.value() > hi) {
      return MakeError("key '" + p + key + "' = " + std::to_string(v.value()) + " is out of range [" +
                       std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    *out = static_cast<int>(v.value());
    return {};
  };
  KVTRIM_RETURN_IF_ERROR(geti("embedding_length", &c.dim, 1, 1 << 16));
  KVTRIM_RETURN_IF_ERROR(geti("block_count", &c.n_layer, 1, 1024));
  KVTRIM_RETURN_IF_ERROR(geti("feed_forward_length", &c.ffn_dim, 1, 1 << 20));
  KVTRIM_RETURN_IF_ERROR(geti("attention.head_count", &c.n_head, 1, 1024));
  KVTRIM_RETURN_IF_ERROR(geti("context_length", &c.ctx, 1, 1 << 24));
  c.n_head_kv = c.n_head;
  if (f.Find(p + "attention.head_count_kv")) KVTRIM_RETURN_IF_ERROR(geti("attention.head_count_kv", &c.n_head_kv, 1, 1024));
  if (c.dim % c.n_head != 0) {
    return MakeError("key '" + p + "embedding_length' = " + std::to_string(c.dim) + " is not a multiple of '" + p +
                     "attention.head_count' = " + std::to_string(c.n_head));
  }
  if (c.n_head % c.n_head_kv != 0) {
    return MakeError("key '" + p + "attention.head_count' = " + std::to_string(c.n_head) + " is not a multiple of '" +
                     p + "attention.head_count_kv' = " + std::to_string(c.n_head_kv));
  }
  c.head_dim = c.dim / c.n_head;
  for (const char* key : {"attention.key_length", "attention.value_length"}) {  // head sizes other than dim/heads
    int n = c.head_dim;
    if (f.Find(p + key)) KVTRIM_RETURN_IF_ERROR(geti(key, &n, 1, 1 << 16));
    if (n != c.head_dim) {
      return MakeError("key '" + p + key + "' = " + std::to_string(n) + " differs from embedding_length / head_count = " +
                       std::to_string(c.head_dim) + " (not supported)");
    }
  }
  c.rope_dims = c.head_dim;
  if (f.Find(p + "rope.dimension_count")) KVTRIM_RETURN_IF_ERROR(geti("rope.dimension_count", &c.rope_dims, 2, c.head_dim));
  if (c.rope_dims % 2 != 0) {
    return MakeError("key '" + p + "rope.dimension_count' = " + std::to_string(c.rope_dims) + " must be even");
  }
  KVTRIM_RETURN_IF_ERROR(ReadRope(f, p, &c));
  KVTRIM_RETURN_IF_ERROR(ReadFileType(f, &c));
  auto eps = f.GetFloat(p + "attention.layer_norm_rms_epsilon");
  if (!eps.ok()) return eps.error();
  if (!(eps.value() > 0 && eps.value() < 1)) {
    return MakeError("key '" + p + "attention.layer_norm_rms_epsilon' = " + std::to_string(eps.value()) +
                     " is out of range (0, 1)");
  }
  c.rms_eps = static_cast<float>(eps.value());

  const io::GgufTensorInfo* emb = f.FindTensor("token_embd.weight");
  if (!emb) return MakeError("missing tensor 'token_embd.weight'");
  if (emb->shape.size() != 2) return MakeError("tensor 'token_embd.weight' must be 2-D");
  if (emb->shape[1] > io::kGgufMaxVocab) {
    return MakeError("tensor 'token_embd.weight' declares a vocabulary of " + std::to_string(emb->shape[1]) +
                     " tokens, over the limit of " + std::to_string(io::kGgufMaxVocab) + " (kGgufMaxVocab)");
  }
  c.vocab = static_cast<int>(emb->shape[1]);
  if (f.Find(p + "vocab_size")) {
    int n = 0;
    KVTRIM_RETURN_IF_ERROR(geti("vocab_size", &n, 1, 1 << 30));
    if (n != c.vocab) {
      return MakeError("key '" + p + "vocab_size' = " + std::to_string(n) + " but tensor 'token_embd.weight' has " +
                       std::to_string(c.vocab) + " rows");
    }
  }
  c.tied_embeddings = f.FindTensor("output.weight") == nullptr;
  return c;
}

Status ApplyRopeOverrides(const RopeOverrides& o, ModelConfig* c) {
  if (!o.any()) return {};
  if (!o.scaling.empty() && o.scaling != "none" && o.scaling != "linear" && o.scaling != "yarn")
    return MakeError("--rope-scaling '" + o.scaling + "': use none, linear or yarn");
  if (o.scale < 0 || (o.scale > 0 && o.scale < 1e-6) || !std::isfinite(o.scale))
    return MakeError("--rope-scale " + std::to_string(o.scale) + " must be > 0");
  if (o.freq_base != 0 && !(o.freq_base > 1 && std::isfinite(o.freq_base)))
    return MakeError("--rope-freq-base " + std::to_string(o.freq_base) + " must be > 1");
  if (o.yarn_orig_ctx < 0) return MakeError("--yarn-orig-ctx " + std::to_string(o.yarn_orig_ctx) + " must be > 0");
  if (o.freq_base != 0) c->rope_base = static_cast<float>(o.freq_base);
  // The type the file's keys give, then the flags: llama.cpp's reading
  // (a factor without a type is linear; type none ignores the factor).
  std::string type = o.scaling.empty() ? c->rope_scaling : o.scaling;
  const double factor = o.scale != 0 ? o.scale : 1.0 / c->rope_freq_scale;
  if (o.scaling.empty() && type == "none" && factor != 1) type = "linear";  // a factor alone: llama.cpp's linear
  if (type == "none" && o.scale != 0 && o.scale != 1)
    return MakeError("--rope-scale " + std::to_string(o.scale) + " cannot apply with --rope-scaling none");
  if (type != "yarn" && o.yarn_orig_ctx != 0)
    return MakeError("--yarn-orig-ctx applies to YaRN scaling only (the RoPE scaling here is " + type + ")");
  if (type == "yarn" && factor == 1)
    return MakeError("--rope-scaling yarn needs --rope-scale F > 1 (the model file gives no factor)");
  // As ReadRope reads the same keys from a file.
  c->rope_scaling = type == "yarn" ? "yarn" : type == "none" || factor == 1 ? "none" : "linear";
  c->rope_freq_scale = type == "none" ? 1.f : static_cast<float>(1.0 / factor);
  if (o.yarn_orig_ctx > 0) c->rope_orig_ctx = o.yarn_orig_ctx;
  return {};
}

}  // namespace kvtrim::model
