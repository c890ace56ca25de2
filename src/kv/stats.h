// Attention statistics per (layer, KV head), aligned with the head's entries
// and computed from attention tiles as they are produced (no N x N matrix is
// ever stored): the registry taps a policy asks for (kv/taps.h: mass,
// window mass, last access, history, recent rows, ...), and, on request,
// the query-side buffers fed by other hooks: the prefill's pre-RoPE keys and
// rotated queries (OnQK) and a ring of pre-RoPE queries (OnQPre).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kv/attention_tap.h"
#include "kv/taps.h"

namespace kvtrim::kv {

// Which statistics a policy needs; collection costs nothing when off.
struct StatsNeeds {
  bool prefill_qk = false;   // the prefill's rotated queries (AM's reference queries, Compactor)
  bool prefill_k = false;    // and its pre-RoPE keys (Compactor-style scorers only: 1/G of the queries' bytes)
  int query_window = 0;      // Expected Attention: pre-RoPE queries of the last w positions
  // Per-entry statistics from the tap registry (taps.h), by name and parameter.
  std::vector<TapUse> taps = {};
  bool any_probs() const { return !taps.empty(); }
};

struct HeadStats {
  std::vector<float> k_pre;           // [N_prefill, d] pre-RoPE keys of the prefill
  std::vector<float> q_rot;           // [N_prefill, G, d] rotated prefill queries of the group
  std::vector<float> q_repeat;        // [N_repeat, G, d] rotated queries of a repeat pass (ReferencePass)
  std::vector<std::vector<float>> q_pre;   // [w][G * d] ring: pre-RoPE queries of the group (query_window)
  std::vector<int64_t> q_pre_pos;          // [w] query position of each ring row (-1: empty)
  TapSet taps;                        // the registry taps of StatsNeeds::taps, one EntryStat each
  // The taps of the reference pass (ReferencePass::taps) over the entries
  // held before it; read by the compression that follows, dropped with the
  // prefill queries (DropPrefillQK).
  TapSet reference;
};

class AttentionStats : public AttentionTap {
 public:
  AttentionStats(int n_layer, int n_head_kv, int group, int head_dim, StatsNeeds needs);

  const StatsNeeds& needs() const { return needs_; }
  int n_layer() const { return n_layer_; }
  HeadStats& head(int layer, int h) { return heads_[layer * n_head_kv_ + h]; }
  const HeadStats& head(int layer, int h) const { return heads_[layer * n_head_kv_ + h]; }
  // The latest query step: steps are logical positions (one per token).
  int64_t step() const { return step_; }
  int group() const { return group_; }  // query heads a KV head (G)

  // The prompt ends at this logical length (SnapKV's window is its last w).
  void SetPromptEnd(int64_t end) { prompt_end_ = end; }
  // A prefill chunk begins: every tap's StartChunk (SnapKV's window votes afresh).
  void StartChunk();

  // Mirror an eviction-only plan on the statistics: keep `keep`.
  void Retain(int layer, int h, const std::vector<int>& keep);
  // Mirror a plan that merges or adds: output entry j combines the original
  // entries from[j] (each tap decides how: masses summed, the latest access,
  // history bits OR-ed, ...).
  void Rebuild(int layer, int h, const std::vector<std::vector<int>>& from);
  void DropPrefillQK();
  // Room for `tokens` more queries (and keys, when kept) per head: a prefill
  // that knows its length copies each batch's rows once, with no regrowth.
  void ReserveQueries(size_t tokens);
  size_t BytesHeld() const;

  // AttentionTap
  void OnBatch(int pos0, int T) override;
  bool WantsProbs(int) const override { return needs_.any_probs(); }
  // Per tile: every statistic that reduces over query heads (group mean,
  // group max) needs only one query's G rows, which a tile holds whole.
  void OnProbTile(int layer, int kv_head, const ProbTile& tile) override;
  // 0 when a tap reads every query (mass, access, history, max); else the
  // earliest query any tap reads (TapInfo::last_queries, reads_from).
  int64_t ProbsFrom(int layer) const override;
  // Row convenience (tests): query t's rows for g = 0..G-1 in order, each
  // over its n visible entries; the G rows go on as one tile.
  void OnProbs(int layer, int kv_head, int t, int g, const float* p, int n);
  bool WantsQK() const override { return needs_.prefill_qk; }
  void OnQK(int layer, const float* k_pre, const float* q_rot, int T) override;
  bool WantsQPre() const override { return needs_.query_window > 0; }
  void OnQPre(int layer, const float* q_pre, int T) override;
  // Kept per layer for the batch's tiles when a tap reads them (TapInfo::hidden_norms).
  bool WantsHiddenNorms() const override { return !hidden_norm_.empty(); }
  void OnHiddenNorms(int layer, const float* norms, int T) override;

 private:
  RowsToTile rows_;         // the row convenience's gathering buffer
  int n_layer_, n_head_kv_, group_, head_dim_;
  StatsNeeds needs_;
  std::vector<HeadStats> heads_;
  int64_t step_ = 0;        // step of the last query of the current batch
  int64_t pos0_ = 0;
  int64_t prompt_end_ = -1;
  std::vector<std::vector<float>> hidden_norm_;  // [layer][T] of the current batch; empty: no tap reads them
  TapClock Clock(int layer) const;
};

}  // namespace kvtrim::kv
