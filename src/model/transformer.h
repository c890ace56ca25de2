// Forward pass of the Llama family (llama: RoPE on adjacent pairs; qwen2: RoPE
// on split halves and q/k/v biases) over the entry-list KV cache.
#pragma once
#include <atomic>
#include <cstdint>
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

// Where a forward pass spends its time (`kvtrim bench --time-breakdown`), in
// nanoseconds summed over calls: wall time of the weight products and of the
// attention (statistics taps excluded), the taps' time summed over the pool's
// threads, and the whole pass. Off unless a ScopedForwardProfile is live on
// the calling thread (then a clock read per phase; nothing when off).
struct ForwardProfile {
  std::atomic<int64_t> matmul_ns{0}, attention_ns{0}, stats_thread_ns{0}, total_ns{0};
  std::atomic<int64_t> tokens{0};
};
class ScopedForwardProfile {
 public:
  explicit ScopedForwardProfile(ForwardProfile* p);
  ~ScopedForwardProfile();
  ScopedForwardProfile(const ScopedForwardProfile&) = delete;
  ScopedForwardProfile& operator=(const ScopedForwardProfile&) = delete;

 private:
  ForwardProfile* prev_;
};

class Transformer {
 public:
  Transformer(const ModelConfig& c, const Weights& w) : c_(c), w_(w), rope_(c, w.rope_freqs) {}

  // Runs T tokens at positions cache.logical_length() onward, appending their
  // keys and values to every head. logits: [T, vocab] if all_logits, else the
  // last position's [vocab]; null: none, and the last layer stops after its
  // attention (its output projection, FFN and the head feed nothing), for
  // passes that want only the keys, values, queries and taps (the reference
  // pass).
  Status Forward(kernels::ThreadPool& pool, kv::KvCache& cache, const int* tokens, int T, bool all_logits,
                 std::vector<float>* logits, ForwardObserver* obs = nullptr) const;

  const ModelConfig& config() const { return c_; }
  const Weights& weights() const { return w_; }
  const Rope& rope() const { return rope_; }

 private:
  void AppendAndAttend(kernels::ThreadPool& pool, kv::KvCache& cache, int l, const float* q, const float* k,
                       const float* v, int T, int pos0, float* att, ForwardObserver* obs,
                       ForwardProfile* prof) const;
  // Attention of the batch's queries over layer l's entries (the batch's
  // own appended already; n_before[h]: head h's entries before the batch).
  void Attend(kernels::ThreadPool& pool, const kv::KvCache& cache, int l, const float* q, const float* k,
              const float* v, int T, int pos0, const std::vector<int>& n_before, float* att, ForwardObserver* obs,
              ForwardProfile* prof) const;
  const ModelConfig& c_;
  const Weights& w_;
  Rope rope_;
};

}  // namespace kvtrim::model
