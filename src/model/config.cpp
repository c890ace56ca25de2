#include "model/config.h"

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

}  // namespace

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
  if (c.dim % c.n_head != 0) return MakeError("embedding_length is not a multiple of head_count");
  if (c.n_head % c.n_head_kv != 0) return MakeError("head_count is not a multiple of head_count_kv");
  c.head_dim = c.dim / c.n_head;
  c.rope_dims = c.head_dim;
  if (f.Find(p + "rope.dimension_count")) KVTRIM_RETURN_IF_ERROR(geti("rope.dimension_count", &c.rope_dims, 2, c.head_dim));
  if (c.rope_dims % 2 != 0) return MakeError("rope.dimension_count must be even");
  if (f.Find(p + "rope.freq_base")) {
    auto b = f.GetFloat(p + "rope.freq_base");
    if (!b.ok()) return b.error();
    if (!(b.value() > 1.0)) return MakeError("rope.freq_base must be > 1");
    c.rope_base = static_cast<float>(b.value());
  }
  auto eps = f.GetFloat(p + "attention.layer_norm_rms_epsilon");
  if (!eps.ok()) return eps.error();
  if (!(eps.value() > 0 && eps.value() < 1)) return MakeError("attention.layer_norm_rms_epsilon out of range");
  c.rms_eps = static_cast<float>(eps.value());

  const io::GgufTensorInfo* emb = f.FindTensor("token_embd.weight");
  if (!emb) return MakeError("missing tensor 'token_embd.weight'");
  if (emb->shape.size() != 2) return MakeError("tensor 'token_embd.weight' must be 2-D");
  if (emb->shape[1] > io::kGgufMaxVocab) {
    return MakeError("tensor 'token_embd.weight' declares a vocabulary of " + std::to_string(emb->shape[1]) +
                     " tokens, over the limit of " + std::to_string(io::kGgufMaxVocab) + " (kGgufMaxVocab)");
  }
  c.vocab = static_cast<int>(emb->shape[1]);
  c.tied_embeddings = f.FindTensor("output.weight") == nullptr;
  return c;
}

}  // namespace kvtrim::model
