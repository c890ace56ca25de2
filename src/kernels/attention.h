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
  // Entries from tail0 on read from these f32 rows instead (row stride
  // tail_stride floats): a prefill batch's own keys and values, computed in
  // f32 and stored quantized, are attended in f32 while the batch is
  // computed (at most one batch in f32). Null: every entry from k and v.
  const float* k_tail = nullptr;
  const float* v_tail = nullptr;
  int tail0 = 0;
  int tail_stride = 0;
  // The causal pass's tile products (Q K^T, P V) in bf16 with f32 sums
  // (attention_bf16.h), where the CPU has them, d is a multiple of 32 and a
  // call has at least kBf16MinRows query rows; else in f32.
  bool bf16_tiles = false;
};

// A tile of normalized attention probabilities: batch queries [t0, t1), all G
// query heads of each, over entries [j0, j1). Row r = (t - t0) * G + g holds
// p(t, g, j) at p[r * ld + (j - j0)]; query t sees entries [0, Visible(t))
// and the entries of the tile it does not see are 0. Every probability of a
// row is final (divided by the row's whole softmax sum), so a consumer may
// use a tile on its own; the tiles of one query block arrive in increasing j0.
struct ProbTile {
  int t0 = 0, t1 = 0;    // batch query positions
  int G = 1;             // query heads per query (all of them, in order)
  int j0 = 0, j1 = 0;    // entries
  const float* p = nullptr;
  int ld = 0;            // row stride of p, >= j1 - j0
  int n_visible0 = 0;    // query t sees entries [0, n_visible0 + t]
  int n = 0;             // entries that exist (Visible is capped by it)
  int Visible(int t) const { return n_visible0 + t + 1 < n ? n_visible0 + t + 1 : n; }
  const float* Row(int t, int g) const { return p + static_cast<size_t>((t - t0) * G + g) * ld; }
};

// Receives the probability tiles of one (layer, KV head), on the thread that
// computes that head.
using TileObserver = std::function<void(const ProbTile& tile)>;

// Decode's probabilities [G, n] as one tile: one query (t = 0) seeing all n entries.
ProbTile WholeTile(const float* p, int G, int n);

// One query position: G query heads (q: [G, d] contiguous) share this KV head.
// out: [G, d]; scratch: at least G * kv.n floats. A tap gets one tile over
// all n entries.
void AttendOne(const KvView& kv, const float* q, int G, float scale, float* out, float* scratch,
               const TileObserver* obs = nullptr);

// Decode over entries stored quantized, split so that threads share a head:
// entries [j0, j0 + n) of a view as a view of their own (logw, rows, and
// the f32 tail shifted).
KvView SubView(const KvView& kv, int j0, int n);
// The split decode itself (chunk lengths, the chunk kernel, the merge):
// attention_decode.h.

// AttendOne for entries stored in another type than F32 (attention_decode.cpp):
// tiles of entries dequantized once and scored 8 at a time; false (nothing
// written) where the kernel does not apply (no AVX2, d not a multiple of 8).
bool AttendOneTiled(const KvView& kv, const float* q, int G, float scale, float* out, float* scratch,
                    const TileObserver* obs);

// Query rows (queries x G) a causal call needs before KvView::bf16_tiles
// applies: decode's few rows would pack each tile for one product.
inline constexpr int kBf16MinRows = 16;

// Keys per tile of AttendCausal (key_tile = 0); docs/kernels.md has the measurement.
inline constexpr int kAttentionKeyTile = 256;

// T query positions (causal): query t sees entries [0, n_visible0 + t].
// q for (t, g) is at q + t * q_stride + g * d; out likewise with out_stride.
// Tiled over keys with an online softmax: no [rows, n] score block, scratch
// O(rows * key_tile + key_tile * d) whatever n. row_ml (optional, [T * G * 2])
// receives each row's final score max and softmax sum, row (t, g) at
// 2 * (t * G + g), for TapCausal.
void AttendCausalMl(const KvView& kv, const float* q, int T, int G, int q_stride, int n_visible0, float scale,
                    float* out, int out_stride, float* row_ml, int key_tile = 0);
// Query positions per block of AttendCausalMl's pass for G query heads: a
// call split at multiples of it (queries [t0, t1) with n_visible0 + t0)
// computes what the whole call does, bit for bit.
int CausalQueryBlock(int G);

// The statistics taps' pass: the probabilities of the same queries, tile by
// tile over the same key tiles, normalized with row_ml from AttendCausalMl (a
// second pass: normalized probabilities need the rows' final max and sum).
// It only reads, so the attention output never depends on taps.
// Query blocks that end at or before t_first are skipped (a tap that reads
// only the last queries).
void TapCausal(const KvView& kv, const float* q, int T, int G, int q_stride, int n_visible0, float scale,
               const float* row_ml, const TileObserver& obs, int key_tile = 0, int t_first = 0);

// Entries up to which AttendCausalTaps keeps a query block's exp values
// (at most 64 rows x 8192 floats = 2 MiB) instead of recomputing them:
// the reference passes of a chunked prefill see budget + chunk + repeat
// entries, past 4096 at 32k, where recomputing cost kvzip's pass 0.26 of a
// prefill (SmolLM2-135M shape, bench/results/prefill-cost-bf16.md).
inline constexpr int kKeepEntries = 8192;

// The output as AttendCausalMl computes it (bit for bit) and the taps' tiles
// of the query blocks that end after t_first, handed to obs after each block
// in the order TapCausal hands them. A block that sees at most kKeepEntries
// entries keeps its exp(s - m_k) tiles and rescales them with the final max
// and sum (no second Q K^T GEMM or exp); longer ones are recomputed as in
// TapCausal, so the scratch stays bounded whatever n is.
void AttendCausalTaps(const KvView& kv, const float* q, int T, int G, int q_stride, int n_visible0, float scale,
                      float* out, int out_stride, const TileObserver& obs, int t_first = 0, int key_tile = 0);

// Both: the output, then, when obs is given, its tiles.
void AttendCausal(const KvView& kv, const float* q, int T, int G, int q_stride, int n_visible0, float scale,
                  float* out, int out_stride, const TileObserver* obs = nullptr, int key_tile = 0);

}  // namespace kvtrim::kernels
