// Taps into the forward pass that feed attention statistics to the cache's
// policies. The model calls them; kv implements them (kv stays below model).
#pragma once

namespace kvtrim::kv {

class AttentionTap {
 public:
  virtual ~AttentionTap() = default;
  // A batch of T tokens at positions pos0 .. pos0+T-1 starts.
  virtual void OnBatch(int /*pos0*/, int /*T*/) {}
  // Whether attention probabilities of this layer should be reported.
  virtual bool WantsProbs(int /*layer*/) const { return false; }
  // Probabilities of batch query t, query head g (of KV head h's group) over
  // the head's first n entries. Called for g = 0..G-1 in order, t increasing.
  virtual void OnProbs(int /*layer*/, int /*kv_head*/, int /*t*/, int /*g*/, const float* /*p*/, int /*n*/) {}
  // Pre-RoPE keys [T, n_head_kv*hd] and rotated queries [T, n_head*hd].
  virtual bool WantsQK() const { return false; }
  virtual void OnQK(int /*layer*/, const float* /*k_pre*/, const float* /*q_rot*/, int /*T*/) {}
  // Pre-RoPE queries [T, n_head*hd] (Expected Attention's query statistics).
  virtual bool WantsQPre() const { return false; }
  virtual void OnQPre(int /*layer*/, const float* /*q_pre*/, int /*T*/) {}
};

}  // namespace kvtrim::kv
