// Attention over one KV head's entry list with per-entry log-weights
// (METHODS.md section 0): a_j = softmax_j(q.k_j * scale + b_j), out = sum a_j v_j.
// Kernels receive entry rows only; which entries exist is the cache's business.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>

#include "io/ggml_types.h"

namespace kvtrim::kernels {

// The entries of one (layer, KV head): n rows of keys and values of `type`.
struct KvView {
  GgmlType type = GgmlType::F32;
  const uint8_t* k = nullptr;  // [n, row_bytes]
  const uint8_t* v = nullptr;  // [n, row_bytes]
  size_t row_bytes = 0;
  const float* logw = nullptr;  // [n]
  int n = 0;
  int d = 0;
};

// Receives the attention probabilities of query row (t, g) over `n` entries.
using ProbObserver = std::function<void(int t, int g, const float* probs, int n)>;

// One query position: G query heads (q: [G, d] contiguous) share this KV head.
// out: [G, d]; scratch: at least G * kv.n floats.
void AttendOne(const KvView& kv, const float* q, int G, float scale, float* out, float* scratch,
               const ProbObserver* obs = nullptr);

// T query positions (causal): query t sees entries [0, n_visible0 + t].
// q for (t, g) is at q + t * q_stride + g * d; out likewise with out_stride.
void AttendCausal(const KvView& kv, const float* q, int T, int G, int q_stride, int n_visible0,
                  float scale, float* out, int out_stride, const ProbObserver* obs = nullptr);

}  // namespace kvtrim::kernels
