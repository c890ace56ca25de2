// Hyperparameters of a Llama-family model, read from GGUF metadata.
#pragma once
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
  int ctx = 0;  // trained context length
  int rope_dims = 0;
  float rope_base = 10000.f;
  float rms_eps = 1e-5f;
  kernels::RopeMode rope_mode = kernels::RopeMode::kNormal;
  bool qkv_bias = false;
  bool tied_embeddings = false;
  int group() const { return n_head / n_head_kv; }
};

Expected<ModelConfig> ReadConfig(const io::GgufFile& f);

}  // namespace kvtrim::model
