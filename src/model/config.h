// Hyperparameters of a Llama-family model, read from GGUF metadata.
#pragma once
#include "kvtrim/options.h"
#include <string>

#include "io/gguf.h"
#include "kernels/ops.h"
#include "kvtrim/status.h"

namespace kvtrim::model {

struct ModelConfig {
  std::string arch;  // "llama" or "qwen2"
  std::string name;
  int dim = 0;
  int n_layer = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  int ffn_dim = 0;
  int vocab = 0;
  int ctx = 0;  // context length the model is read at: the trained one unless EngineOptions::ctx says otherwise
  int trained_ctx = 0;  // the file's context_length
  int rope_dims = 0;
  float rope_base = 10000.f;
  float rms_eps = 1e-5f;
  kernels::RopeMode rope_mode = kernels::RopeMode::kNormal;
  // RoPE scaling ({arch}.rope.scaling.*): "none", "linear" (positions times
  // rope_freq_scale = 1 / factor, as llama.cpp's freq_scale) or "yarn"
  // (ggml's rope_yarn with ext_factor 1, beta_fast 32, beta_slow 1);
  // per-dimension frequency factors (Llama 3.1) come from the
  // rope_freqs.weight tensor.
  std::string rope_scaling = "none";
  float rope_freq_scale = 1.f;
  float rope_attn_factor = 1.f;  // rope.scaling.attn_factor: cos/sin are multiplied by it
  int rope_orig_ctx = 0;   // rope.scaling.original_context_length (default: ctx)
  bool rope_freq_factors = false;  // the file has rope_freqs.weight
  int file_type = -1;      // general.file_type (-1: absent)
  bool qkv_bias = false;
  bool tied_embeddings = false;
  int group() const { return n_head / n_head_kv; }
};

Expected<ModelConfig> ReadConfig(const io::GgufFile& f);
// Applies RoPE overrides to a config read from a file, as the same keys in
// the file would (an override that cannot apply is an error naming it).
Status ApplyRopeOverrides(const RopeOverrides& o, ModelConfig* c);

// general.file_type as llama.cpp names it (LLAMA_FTYPE_*, without the
// prefix) followed by the number: "MOSTLY_Q4_K_M (15)"; "unknown (N)" for
// a number llama.cpp does not define, "absent" for -1.
std::string FileTypeName(int file_type);

}  // namespace kvtrim::model
