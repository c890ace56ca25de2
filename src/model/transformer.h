// Forward pass of the Llama family (llama: RoPE on adjacent pairs; qwen2: RoPE
// on split halves and q/k/v biases) over the entry-list KV cache.
#pragma once
#include <vector>

#include "kernels/attention.h"
#include "kernels/thread_pool.h"
#include "kv/attention_tap.h"
#include "kv/cache.h"
#include "kvtrim/status.h"
#include "model/config.h"
#include "model/rope.h"
#include "model/weights.h"

namespace kvtrim::model {

using ForwardObserver = kv::AttentionTap;

class Transformer {
 public:
  Transformer(const ModelConfig& c, const Weights& w) : c_(c), w_(w), rope_(c, w.rope_freqs) {}

  // Runs T tokens at positions cache.logical_length() onward, appending their
  // keys and values to every head. logits: [T, vocab] if all_logits, else the
  // last position's [vocab].
  Status Forward(kernels::ThreadPool& pool, kv::KvCache& cache, const int* tokens, int T, bool all_logits,
                 std::vector<float>* logits, ForwardObserver* obs = nullptr) const;

  const ModelConfig& config() const { return c_; }
  const Weights& weights() const { return w_; }
  const Rope& rope() const { return rope_; }

 private:
  void AppendAndAttend(kernels::ThreadPool& pool, kv::KvCache& cache, int l, const float* q, const float* k,
                       const float* v, int T, int pos0, float* att, ForwardObserver* obs) const;
  const ModelConfig& c_;
  const Weights& w_;
  Rope rope_;
};

}  // namespace kvtrim::model
