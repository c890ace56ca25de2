// Model weights as views into the mapped GGUF file (no copies of the
// matrices); small vectors (norms, biases) are held as floats.
#pragma once
#include <memory>
#include <vector>

#include "io/gguf.h"
#include "kernels/matmul.h"
#include "kernels/qgemm_packed.h"
#include "kvtrim/status.h"
#include "model/config.h"

namespace kvtrim::model {

struct LayerWeights {
  std::vector<float> attn_norm, ffn_norm;  // [dim]
  kernels::WeightView wq, wk, wv, wo;      // [n_head*hd, dim], [n_kv*hd, dim] x2, [dim, n_head*hd]
  kernels::WeightView w_gate, w_up, w_down;  // [ffn, dim] x2, [dim, ffn]
  std::vector<float> bq, bk, bv;           // qwen2 only
};

struct Weights {
  kernels::WeightView tok_embd;  // [vocab, dim]
  kernels::WeightView output;    // [vocab, dim] (tok_embd when tied)
  std::vector<float> output_norm;
  std::vector<float> rope_freqs;  // [rope_dims/2] RoPE frequency factors (Llama 3.1), empty if absent
  std::vector<LayerWeights> layers;
  size_t total_bytes = 0;  // bytes of all weight matrices and vectors
  // Load-time repacks of the Q8_0/Q4_0 matrices the prefill products use
  // (kernels/qgemm_packed.h; the views' `packed` point here). The originals
  // stay: decode and the embedding lookup read them.
  std::vector<std::shared_ptr<const kernels::PackedWeights>> packed;
  size_t packed_bytes = 0;  // bytes of the repacked copies (not in total_bytes)
  size_t released_bytes = 0;  // file pages of repacked matrices dropped from resident memory
};

Expected<Weights> LoadWeights(const io::GgufFile& f, const ModelConfig& c);

}  // namespace kvtrim::model
