// The KV cache of METHODS.md section 0: per layer and per KV head a list of
// entries (post-RoPE key, value, original position, log-weight). Heads may
// hold different numbers of entries; the logical length N positions new
// tokens. Entry rows are stored in one ggml row type (F32, or F16/Q8_0/Q4_0
// for quantized storage); memory is really freed when entries go.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "io/ggml_types.h"
#include "kernels/attention.h"
#include "kernels/huge_pages.h"
#include "kv/rope_map.h"

namespace kvtrim::kv {

struct Plan;

// One (layer, KV head): its entries, stored contiguously.
class HeadStore {
 public:
  HeadStore() = default;
  // rotated: rows are stored rotated (kernels/hadamard.h); Append, Read and
  // Write take and give them as they are, the raw rows (key_row, View,
  // AppendStored) are the rotated ones.
  HeadStore(int head_dim, GgmlType type, bool rotated = false) : d_(head_dim), type_(type), rotated_(rotated) {}

  int size() const { return n_; }
  int head_dim() const { return d_; }
  GgmlType type() const { return type_; }
  bool rotated() const { return rotated_; }
  size_t row_bytes() const;

  void Append(const float* k, const float* v, int32_t pos, float logw);
  // Append rows already in this store's type (no re-quantization).
  void AppendStored(const uint8_t* k, const uint8_t* v, int32_t pos, float logw);
  // Keep entries `keep` (increasing indices), dropping the rest; frees memory.
  void Retain(const std::vector<int>& keep);
  // Drop the entries from n on, keeping the allocation (a reference pass
  // rewinds its copy between the chunks it repeats). n <= size().
  void Truncate(int n);
  void Reserve(int n);
  void ShrinkToFit();

  const uint8_t* key_row(int i) const { return k_.data() + row_bytes() * i; }
  const uint8_t* value_row(int i) const { return v_.data() + row_bytes() * i; }
  void ReadKey(int i, float* out) const;
  void ReadValue(int i, float* out) const;
  void WriteKey(int i, const float* k);
  void WriteValue(int i, const float* v);
  int32_t pos(int i) const { return pos_[i]; }
  float logw(int i) const { return logw_[i]; }
  void set_logw(int i, float b) { logw_[i] = b; }
  void set_pos(int i, int32_t p) { pos_[i] = p; }
  const std::vector<int32_t>& positions() const { return pos_; }

  // Apply a policy's plan (kept, merged and synthetic entries, overrides).
  // For plans that merge or add, returns per output entry the original
  // entries it comes from (empty for a synthetic one), so statistics can
  // follow; keep-only plans compact in place and return nothing.
  std::vector<std::vector<int>> Apply(const Plan& plan);
  // Re-store every row in another type (quantize what is kept), rotated or not.
  void Convert(GgmlType type, bool rotated);

  kernels::KvView View() const;
  // Bytes allocated for this head (keys, values, positions, log-weights).
  size_t BytesHeld() const;
  // Bytes its entries occupy (allocation slack excluded).
  size_t BytesUsed() const;

 private:
  void Grow(int need);
  void Realloc(int cap);
  void Store(const float* x, uint8_t* row);  // quantize (rotated first if the store is)
  void Load(const uint8_t* row, float* out) const;
  int d_ = 0;
  GgmlType type_ = GgmlType::F32;
  bool rotated_ = false;
  int n_ = 0;
  int cap_ = 0;
  // read by every decode step: 2 MiB and more in huge pages (kernels/huge_pages.h)
  kernels::StreamedVector<uint8_t> k_, v_;
  std::vector<int32_t> pos_;
  std::vector<float> logw_;
};

class KvCache {
 public:
  KvCache(int n_layer, int n_head_kv, int head_dim, GgmlType type = GgmlType::F32, bool rotated = false);

  int n_layer() const { return n_layer_; }
  int n_head_kv() const { return n_head_kv_; }
  int head_dim() const { return head_dim_; }
  GgmlType type() const { return type_; }
  // Rows stored rotated (HeadStore): attention rotates its queries and
  // rotates its outputs back.
  bool rotated() const { return rotated_; }

  HeadStore& head(int layer, int h) { return heads_[layer * n_head_kv_ + h]; }
  const HeadStore& head(int layer, int h) const { return heads_[layer * n_head_kv_ + h]; }

  // Tokens ever appended (positions of new tokens start here).
  int64_t logical_length() const { return n_logical_; }
  void AdvanceLogical(int n) { n_logical_ += n; }
  // Where the keys sit in RoPE positions (kv/rope_map.h): the identity
  // until a re-base; new tokens rotate at rope_length().
  const RopeMap& rope_map() const { return rope_map_; }
  void set_rope_map(RopeMap m) { rope_map_ = std::move(m); }
  int64_t rope_length() const { return n_logical_ - rope_map_.shift(); }

  // Room for `tokens` more entries in every head, allocated at once. A
  // prompt or a reference pass appends in batches of a ubatch, and each
  // batch reserves exactly its own rows: without this every batch moved the
  // whole head into a fresh buffer (a one-shot 16k pass copied and faulted
  // in tens of gigabytes). The capacity is what the appends reach anyway.
  void ReserveMore(int tokens);

  // Bytes the cache holds now, and what a full F32 cache of the logical
  // length would hold (keys + values + positions + log-weights).
  size_t BytesHeld() const;
  size_t BytesFull() const;
  // A full cache of the logical length with its rows in `type`.
  size_t BytesFull(GgmlType type) const;
  // Bytes the entries themselves occupy: BytesHeld without the allocation
  // slack, so a full f32 cache uses exactly BytesFull.
  size_t BytesUsed() const;
  size_t EntriesHeld() const;
  // Store every head's rows in `type`, rotated or not, from now on
  // (existing rows converted); nothing changes when the rows are already
  // of that type (their rotation kept).
  void Convert(GgmlType type, bool rotated);

  // Whether attention over this cache takes its prefill tile products in
  // bf16 (kernels::KvView::bf16_tiles); a copy keeps the setting.
  bool bf16_tiles() const { return bf16_tiles_; }
  void set_bf16_tiles(bool on) { bf16_tiles_ = on; }

 private:
  int n_layer_, n_head_kv_, head_dim_;
  GgmlType type_;
  bool rotated_ = false;
  bool bf16_tiles_ = false;
  int64_t n_logical_ = 0;
  RopeMap rope_map_;
  std::vector<HeadStore> heads_;
};

}  // namespace kvtrim::kv
