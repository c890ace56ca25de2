#include "kv/stats.h"

#include <algorithm>
#include <limits>

namespace kvtrim::kv {

AttentionStats::AttentionStats(int n_layer, int n_head_kv, int group, int head_dim, StatsNeeds needs)
    : n_layer_(n_layer), n_head_kv_(n_head_kv), group_(group), head_dim_(head_dim), needs_(needs) {
  heads_.resize(static_cast<size_t>(n_layer) * n_head_kv);
  for (auto& h : heads_) {
    h.q_pre.resize(needs_.query_window);
    h.q_pre_pos.assign(needs_.query_window, -1);
    for (const TapUse& use : needs_.taps)  // unknown names: refused by Compressor::Create
      if (const TapInfo* info = FindTap(use.name)) h.taps.Add(use.name, info->make({group, head_dim, use.param}));
  }
  for (const TapUse& use : needs_.taps)
    if (const TapInfo* info = FindTap(use.name); info && info->hidden_norms) hidden_norm_.resize(n_layer);
}

TapClock AttentionStats::Clock(int layer) const {
  TapClock c{pos0_, step_, prompt_end_};
  if (!hidden_norm_.empty() && !hidden_norm_[layer].empty()) c.hidden_norm = hidden_norm_[layer].data();
  return c;
}

void AttentionStats::OnHiddenNorms(int layer, const float* norms, int T) {
  if (layer < 0 || layer >= static_cast<int>(hidden_norm_.size())) return;
  hidden_norm_[layer].assign(norms, norms + T);
}

void AttentionStats::OnBatch(int pos0, int T) {
  // One query step per token: the step of a query is its logical position.
  pos0_ = pos0;
  step_ = pos0 + T - 1;
  for (auto& v : hidden_norm_) v.clear();  // this batch's come with its layers
}

void AttentionStats::OnProbs(int layer, int kv_head, int t, int g, const float* p, int n) {
  if (const ProbTile* tile = rows_.Add(t, g, group_, p, n)) OnProbTile(layer, kv_head, *tile);
}

void AttentionStats::OnProbTile(int layer, int kv_head, const ProbTile& tile) {
  const TapClock clock = Clock(layer);
  for (const auto& [name, s] : head(layer, kv_head).taps) s->OnTile(tile, clock);
}

int64_t AttentionStats::ProbsFrom(int layer) const {
  const TapClock clock = Clock(layer);
  int64_t first = std::numeric_limits<int64_t>::max();  // nothing read
  for (const TapUse& use : needs_.taps) {
    const TapInfo* info = FindTap(use.name);
    if (!info) return 0;
    if (info->reads_from) {
      first = std::min(first, info->reads_from(use.param, clock));
    } else {
      if (info->last_queries == 0) return 0;
      first = std::min(first, step_ - info->last_queries + 1);
    }
  }
  return std::max<int64_t>(first, 0);
}

void AttentionStats::OnQK(int layer, const float* k_pre, const float* q_rot, int T) {
  const size_t d = head_dim_, gd = static_cast<size_t>(group_) * head_dim_, n = static_cast<size_t>(T);
  for (int h = 0; h < n_head_kv_; ++h) {
    HeadStats& hs = head(layer, h);
    for (size_t t = 0; t < n; ++t) {  // into the room ReserveQueries made, where the caller knew the length
      const float* qr = q_rot + (t * n_head_kv_ + h) * gd;
      hs.q_rot.insert(hs.q_rot.end(), qr, qr + gd);
    }
    if (!needs_.prefill_k) continue;  // only Compactor-style scorers read the keys
    for (size_t t = 0; t < n; ++t) {
      const float* kr = k_pre + (t * n_head_kv_ + h) * d;
      hs.k_pre.insert(hs.k_pre.end(), kr, kr + d);
    }
  }
}

void AttentionStats::OnQPre(int layer, const float* q_pre, int T) {
  const int w = needs_.query_window, gd = group_ * head_dim_;
  for (int t = std::max(0, T - w); t < T; ++t) {  // only the batch's last w queries
    const int64_t pos = pos0_ + t;
    for (int h = 0; h < n_head_kv_; ++h) {
      HeadStats& hs = head(layer, h);
      const float* qr = q_pre + static_cast<size_t>(t) * n_head_kv_ * gd + static_cast<size_t>(h) * gd;
      hs.q_pre[pos % w].assign(qr, qr + gd);
      hs.q_pre_pos[pos % w] = pos;
    }
  }
}

void AttentionStats::Retain(int layer, int h, const std::vector<int>& keep) {
  HeadStats& hs = head(layer, h);
  for (const auto& [name, s] : hs.taps) s->Retain(keep);
  for (const auto& [name, s] : hs.reference) s->Retain(keep);
}

// The query-side buffers are per query, not per entry: they stay as they are.
void AttentionStats::Rebuild(int layer, int h, const std::vector<std::vector<int>>& from) {
  HeadStats& hs = head(layer, h);
  for (const auto& [name, s] : hs.taps) s->Rebuild(from);
  for (const auto& [name, s] : hs.reference) s->Rebuild(from);
}

void AttentionStats::StartChunk() {
  for (auto& h : heads_)
    for (const auto& [name, s] : h.taps) s->StartChunk();
}

void AttentionStats::DropPrefillQK() {
  for (auto& h : heads_) {
    std::vector<float>().swap(h.k_pre);
    std::vector<float>().swap(h.q_rot);
    std::vector<float>().swap(h.q_repeat);
    h.reference = TapSet{};
  }
}

void AttentionStats::ReserveQueries(size_t tokens) {
  if (!needs_.prefill_qk) return;
  const size_t d = head_dim_;
  for (auto& h : heads_) {
    h.q_rot.reserve(h.q_rot.size() + tokens * group_ * d);
    if (needs_.prefill_k) h.k_pre.reserve(h.k_pre.size() + tokens * d);
  }
}

size_t AttentionStats::BytesHeld() const {
  size_t s = 0;
  for (const auto& h : heads_) {
    for (const auto& [name, t] : h.taps) s += t->BytesHeld();
    for (const auto& [name, t] : h.reference) s += t->BytesHeld();
    s += 4 * (h.k_pre.capacity() + h.q_rot.capacity() + h.q_repeat.capacity());
    for (const auto& r : h.q_pre) s += 4 * r.capacity();
    s += 8 * h.q_pre_pos.capacity();
  }
  return s;
}

}  // namespace kvtrim::kv
