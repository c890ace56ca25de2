// Forward pass of the Llama family (llama: RoPE on adjacent pairs; qwen2: RoPE
// on split halves and q/k/v biases) over the entry-list KV cache.
#pragma once
#include <vector>

#include "kernels/attention.h"
#include "kernels/thread_pool.h"
#include "kv/cache.h"
#include "kvtrim/status.h"
#include "model/config.h"
#include "model/weights.h"

namespace kvtrim::model {

// Optional taps into the forward pass (attention statistics, pre-RoPE keys).
class ForwardObserver {
 public:
  virtual ~ForwardObserver() = default;
  // Whether attention probabilities of this layer should be reported.
  virtual bool WantsProbs(int /*layer*/) const { return false; }
  // Probabilities of query position t (0-based in this batch), query head g of
  // the group of KV head h, over the head's first n entries.
  virtual void OnProbs(int /*layer*/, int /*kv_head*/, int /*t*/, int /*g*/, const float* /*p*/, int /*n*/) {}
  // Pre-RoPE keys [T, n_head_kv*hd] and post-RoPE queries [T, n_head*hd] of a batch.
  virtual void OnQK(int /*layer*/, const float* /*k_pre*/, const float* /*q_rot*/, int /*T*/) {}
};

class Transformer {
 public:
  Transformer(const ModelConfig& c, const Weights& w) : c_(c), w_(w) {}

  // Runs T tokens at positions cache.logical_length() onward, appending their
  // keys and values to every head. logits: [T, vocab] if all_logits, else the
  // last position's [vocab].
  Status Forward(kernels::ThreadPool& pool, kv::KvCache& cache, const int* tokens, int T, bool all_logits,
                 std::vector<float>* logits, ForwardObserver* obs = nullptr) const;

  const ModelConfig& config() const { return c_; }
  const Weights& weights() const { return w_; }

 private:
  const ModelConfig& c_;
  const Weights& w_;
};

}  // namespace kvtrim::model
