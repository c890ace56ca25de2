// Taps into the forward pass that feed attention statistics to the cache's
// policies. The model calls them; kv implements them (kv stays below model).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/attention.h"
#include "kvtrim/status.h"

namespace kvtrim::kv {

using kernels::ProbTile;

class AttentionTap {
 public:
  virtual ~AttentionTap() = default;
  // A batch of T tokens at positions pos0 .. pos0+T-1 starts.
  virtual void OnBatch(int /*pos0*/, int /*T*/) {}
  // Whether attention probabilities of this layer should be reported.
  virtual bool WantsProbs(int /*layer*/) const { return false; }
  // Normalized probabilities of KV head h's group over one tile of entries
  // (kernels/attention.h: queries [t0, t1), all G query heads of each,
  // entries [j0, j1), masked entries 0). Per (layer, head): tiles of a query
  // block in increasing j0, blocks in increasing t0. Different heads may be
  // reported from different threads at once.
  virtual void OnProbTile(int /*layer*/, int /*kv_head*/, const ProbTile& /*tile*/) {}
  // The first logical query position whose probabilities this tap reads in
  // the current batch (e.g. SnapKV's observation window): the model may skip
  // the tiles of earlier queries (it may also deliver them).
  virtual int64_t ProbsFrom(int /*layer*/) const { return 0; }
  // Pre-RoPE keys [T, n_head_kv*hd] and rotated queries [T, n_head*hd].
  virtual bool WantsQK() const { return false; }
  virtual void OnQK(int /*layer*/, const float* /*k_pre*/, const float* /*q_rot*/, int /*T*/) {}
  // Pre-RoPE queries [T, n_head*hd] (Expected Attention's query statistics).
  virtual bool WantsQPre() const { return false; }
  virtual void OnQPre(int /*layer*/, const float* /*q_pre*/, int /*T*/) {}
  // The L2 norm ||h_t|| of each of the batch's T queries' attention input
  // (the hidden state after the layer's attention norm), before the layer's
  // tiles are reported (KVzip+'s normalisation).
  virtual bool WantsHiddenNorms() const { return false; }
  virtual void OnHiddenNorms(int /*layer*/, const float* /*norms*/, int /*T*/) {}
  // The layer's queries are reported (OnQK) and its attention comes next: a
  // tap may change what that layer of the cache holds before the batch
  // appends to it and reads it (a reference pass that compresses each layer
  // as it reaches it). An error stops the forward pass.
  virtual Status BeforeAttend(int /*layer*/) { return {}; }
};

// Whole probability rows into tiles, for callers that have rows (tests, and
// code that reads rows of its own): the rows of one query arrive for
// g = 0..G-1 in order (each over the query's n visible entries); after the
// last one they are handed on as one tile covering [0, n). One query at a
// time: not for concurrent use.
class RowsToTile {
 public:
  // The tile when row g is the query's last (g == G - 1), else nullptr.
  const ProbTile* Add(int t, int g, int G, const float* p, int n) {
    if (g == 0) buf_.clear();
    buf_.resize(static_cast<size_t>(g + 1) * n, 0.f);
    std::copy(p, p + n, buf_.begin() + static_cast<std::ptrdiff_t>(g) * n);
    if (g != G - 1) return nullptr;
    tile_.t0 = t;
    tile_.t1 = t + 1;
    tile_.G = G;
    tile_.j0 = 0;
    tile_.j1 = n;
    tile_.p = buf_.data();
    tile_.ld = n;
    tile_.n_visible0 = n - 1 - t;
    tile_.n = n;
    return &tile_;
  }

 private:
  std::vector<float> buf_;
  ProbTile tile_;
};

}  // namespace kvtrim::kv
