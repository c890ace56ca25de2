#include "kv/stats.h"

#include <algorithm>
#include <bit>
#include <limits>

namespace kvtrim::kv {

AttentionStats::AttentionStats(int n_layer, int n_head_kv, int group, int head_dim, StatsNeeds needs)
    : n_layer_(n_layer), n_head_kv_(n_head_kv), group_(group), head_dim_(head_dim), needs_(needs) {
  heads_.resize(static_cast<size_t>(n_layer) * n_head_kv);
  for (auto& h : heads_) {
    h.words = needs_.history > 0 ? (needs_.history + 63) / 64 : 0;
    h.recent.resize(needs_.recent_window);
    h.recent_pos.assign(needs_.recent_window, -1);
    h.q_pre.resize(needs_.query_window);
    h.q_pre_pos.assign(needs_.query_window, -1);
    for (const std::string& name : needs_.taps)  // unknown names: refused by Compressor::Create
      if (const TapInfo* info = FindTap(name)) h.taps.Add(name, info->make({group, head_dim}));
  }
}

void AttentionStats::Grow(HeadStats& hs, int n) const {
  if (n <= hs.n) return;
  if (needs_.acc_mass) hs.acc.resize(n, 0.f);
  if (needs_.obs_window > 0) hs.obs.resize(n, 0.f);
  if (needs_.access) hs.last_access.resize(n, -1);
  if (hs.words) hs.hist.resize(static_cast<size_t>(n) * hs.words, 0);
  hs.n = n;
}

void AttentionStats::OnBatch(int pos0, int T) {
  // One query step per token: the step of a query is its logical position.
  pos0_ = pos0;
  step_ = pos0 + T - 1;
}

void AttentionStats::OnProbs(int layer, int kv_head, int t, int g, const float* p, int n) {
  if (const ProbTile* tile = rows_.Add(t, g, group_, p, n)) OnProbTile(layer, kv_head, *tile);
}

void AttentionStats::OnProbTile(int layer, int kv_head, const ProbTile& tile) {
  HeadStats& hs = head(layer, kv_head);
  Grow(hs, std::min(tile.j1, tile.Visible(tile.t1 - 1)));
  for (int t = tile.t0; t < tile.t1; ++t) {
    const int je = std::min(tile.j1, tile.Visible(t));  // the query's entries in this tile: [j0, je)
    if (je <= tile.j0) continue;
    TileMass(hs, tile, t, je);
    TileAccess(hs, tile, t, je);
  }
  for (const auto& [name, s] : hs.taps) s->OnTile(tile, pos0_, step_);
}

int64_t AttentionStats::ProbsFrom(int) const {
  if (needs_.acc_mass || needs_.access || needs_.history > 0) return 0;
  int64_t first = std::numeric_limits<int64_t>::max();  // nothing read
  for (const std::string& name : needs_.taps) {
    const TapInfo* info = FindTap(name);
    if (!info || info->last_queries == 0) return 0;
    first = std::min(first, step_ - info->last_queries + 1);
  }
  if (needs_.obs_window > 0 && prompt_end_ >= 0) first = std::min(first, prompt_end_ - needs_.obs_window);
  if (needs_.recent_window > 0) first = std::min(first, step_ - needs_.recent_window + 1);
  return std::max<int64_t>(first, 0);
}

// Sums and means over the query's G rows (same order as row by row: g = 0..G-1 per entry).
void AttentionStats::TileMass(HeadStats& hs, const ProbTile& tile, int t, int je) const {
  const int G = tile.G, j0 = tile.j0;
  const int64_t pos = pos0_ + t;
  const float inv = 1.f / static_cast<float>(group_);
  for (int g = 0; g < G; ++g) {
    const float* p = tile.Row(t, g);  // p[j - j0], j in [j0, je)
    if (needs_.acc_mass)
      for (int j = j0; j < je; ++j) hs.acc[j] += p[j - j0];
    if (needs_.obs_window > 0 && prompt_end_ >= 0 && pos >= prompt_end_ - needs_.obs_window && pos < prompt_end_)
      for (int j = j0; j < je; ++j) hs.obs[j] += p[j - j0];
  }
  if (needs_.recent_window > 0 && pos > step_ - needs_.recent_window) {  // only the batch's last w queries
    std::vector<float>& row = hs.recent[pos % needs_.recent_window];
    if (j0 == 0) {  // the query's first tile: the ring row is its visible entries
      row.resize(tile.Visible(t));
      hs.recent_pos[pos % needs_.recent_window] = pos;
    }
    for (int g = 0; g < G; ++g) {
      const float* p = tile.Row(t, g);
      if (g == 0)
        for (int j = j0; j < je; ++j) row[j] = p[j - j0] * inv;
      else
        for (int j = j0; j < je; ++j) row[j] += p[j - j0] * inv;
    }
  }
}

// Access decisions (LRU's last access, ScissorHands' history bits) use the
// max over the group's query heads against 1/n, n the query's visible count.
void AttentionStats::TileAccess(HeadStats& hs, const ProbTile& tile, int t, int je) const {
  if (!needs_.access && !hs.words) return;
  const int G = tile.G, j0 = tile.j0;
  const float thr = 1.f / static_cast<float>(tile.Visible(t));
  const int64_t step = pos0_ + t;
  const int64_t slot = hs.words ? step % needs_.history : 0;
  const uint64_t bit = uint64_t{1} << (slot % 64);
  const size_t word = static_cast<size_t>(slot / 64);
  for (int j = j0; j < je; ++j) {
    float mx = tile.Row(t, 0)[j - j0];
    for (int g = 1; g < G; ++g) mx = std::max(mx, tile.Row(t, g)[j - j0]);
    if (needs_.access && mx >= thr) hs.last_access[j] = step;
    if (hs.words) {
      uint64_t& w = hs.hist[static_cast<size_t>(j) * hs.words + word];
      w = mx >= thr ? (w | bit) : (w & ~bit);
    }
  }
}

int64_t AttentionStats::HistoryCount(int layer, int h, int i) const {
  const HeadStats& hs = head(layer, h);
  if (!hs.words || i >= hs.n) return 0;
  int64_t c = 0;
  for (int w = 0; w < hs.words; ++w) c += std::popcount(hs.hist[static_cast<size_t>(i) * hs.words + w]);
  return c;
}

std::vector<double> AttentionStats::RecentMass(int layer, int h, int n) const {
  const HeadStats& hs = head(layer, h);
  std::vector<double> m(n, 0.0);
  for (size_t r = 0; r < hs.recent.size(); ++r) {
    if (hs.recent_pos[r] < 0 || hs.recent_pos[r] <= step_ - needs_.recent_window) continue;
    const std::vector<float>& row = hs.recent[r];
    for (int j = 0; j < n && j < static_cast<int>(row.size()); ++j) m[j] += row[j];
  }
  return m;
}

int AttentionStats::RecentQueries(int layer, int h) const {
  const HeadStats& hs = head(layer, h);
  int q = 0;
  for (size_t r = 0; r < hs.recent.size(); ++r)
    q += hs.recent_pos[r] >= 0 && hs.recent_pos[r] > step_ - needs_.recent_window;
  return q;
}

void AttentionStats::OnQK(int layer, const float* k_pre, const float* q_rot, int T) {
  const int d = head_dim_, G = group_;
  for (int h = 0; h < n_head_kv_; ++h) {
    HeadStats& hs = head(layer, h);
    for (int t = 0; t < T; ++t) {
      const float* kr = k_pre + static_cast<size_t>(t) * n_head_kv_ * d + h * d;
      hs.k_pre.insert(hs.k_pre.end(), kr, kr + d);
      const float* qr = q_rot + static_cast<size_t>(t) * n_head_kv_ * G * d + h * G * d;
      hs.q_rot.insert(hs.q_rot.end(), qr, qr + G * d);
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
  int w = 0;
  for (int i : keep) {
    if (i < hs.n) {
      if (!hs.acc.empty()) hs.acc[w] = hs.acc[i];
      if (!hs.obs.empty()) hs.obs[w] = hs.obs[i];
      if (!hs.last_access.empty()) hs.last_access[w] = hs.last_access[i];
      for (int k = 0; k < hs.words; ++k) hs.hist[static_cast<size_t>(w) * hs.words + k] = hs.hist[static_cast<size_t>(i) * hs.words + k];
    }
    ++w;
  }
  for (std::vector<float>& row : hs.recent) {  // ring rows have their own lengths
    size_t k = 0;
    for (int i : keep)
      if (i < static_cast<int>(row.size())) row[k++] = row[i];
    row.resize(k);
  }
  // Entries without statistics yet (kept beyond hs.n) get zeroed ones.
  hs.acc.resize(std::min<size_t>(hs.acc.size(), w));
  hs.obs.resize(std::min<size_t>(hs.obs.size(), w));
  hs.last_access.resize(std::min<size_t>(hs.last_access.size(), w));
  hs.hist.resize(std::min<size_t>(hs.hist.size(), static_cast<size_t>(w) * hs.words));
  hs.n = std::min(hs.n, w);
  Grow(hs, w);
  // Free memory after a large eviction; a few entries per decode step would
  // otherwise reallocate every step.
  auto fit = [](auto& v) {
    if (v.capacity() > v.size() + v.size() / 8 + 64) v.shrink_to_fit();
  };
  fit(hs.acc);
  fit(hs.obs);
  fit(hs.last_access);
  fit(hs.hist);
  for (const auto& [name, s] : hs.taps) s->Retain(keep);
  for (const auto& [name, s] : hs.reference) s->Retain(keep);
}

void AttentionStats::Rebuild(int layer, int h, const std::vector<std::vector<int>>& from) {
  HeadStats& hs = head(layer, h);
  HeadStats out;
  out.words = hs.words;
  Grow(out, static_cast<int>(from.size()));
  for (size_t j = 0; j < from.size(); ++j)
    for (int i : from[j]) {
      if (i >= hs.n) continue;
      if (!out.acc.empty()) out.acc[j] += hs.acc[i];
      if (!out.obs.empty()) out.obs[j] += hs.obs[i];
      if (!out.last_access.empty()) out.last_access[j] = std::max(out.last_access[j], hs.last_access[i]);
      for (int w = 0; w < hs.words; ++w) out.hist[j * hs.words + w] |= hs.hist[static_cast<size_t>(i) * hs.words + w];
    }
  out.recent_pos = std::move(hs.recent_pos);
  out.q_pre = std::move(hs.q_pre);  // per query, not per entry
  out.q_pre_pos = std::move(hs.q_pre_pos);
  out.recent.resize(hs.recent.size());
  for (size_t r = 0; r < hs.recent.size(); ++r) {  // merged entries received the sum of their sources' mass
    const std::vector<float>& row = hs.recent[r];
    std::vector<float>& o = out.recent[r];
    for (size_t j = 0; j < from.size(); ++j) {
      float sum = 0.f;
      bool any = false;
      for (int i : from[j])
        if (i < static_cast<int>(row.size())) sum += row[i], any = true;
      if (!any) break;  // entries after the row's query (sources are in order)
      o.push_back(sum);
    }
  }
  for (const auto& [name, s] : hs.taps) s->Rebuild(from);
  for (const auto& [name, s] : hs.reference) s->Rebuild(from);
  out.taps = std::move(hs.taps);
  out.reference = std::move(hs.reference);
  out.k_pre = std::move(hs.k_pre);
  out.q_rot = std::move(hs.q_rot);
  out.q_repeat = std::move(hs.q_repeat);
  hs = std::move(out);
}

void AttentionStats::ClearObservation() {
  for (auto& h : heads_) std::fill(h.obs.begin(), h.obs.end(), 0.f);
}

void AttentionStats::DropPrefillQK() {
  for (auto& h : heads_) {
    std::vector<float>().swap(h.k_pre);
    std::vector<float>().swap(h.q_rot);
    std::vector<float>().swap(h.q_repeat);
    h.reference = TapSet{};
  }
}

size_t AttentionStats::BytesHeld() const {
  size_t s = 0;
  for (const auto& h : heads_) {
    for (const auto& [name, t] : h.taps) s += t->BytesHeld();
    for (const auto& [name, t] : h.reference) s += t->BytesHeld();
    s += 4 * (h.acc.capacity() + h.obs.capacity() + h.k_pre.capacity() + h.q_rot.capacity() +
              h.q_repeat.capacity()) +
         8 * (h.last_access.capacity() + h.hist.capacity() + h.recent_pos.capacity());
    for (const auto& r : h.recent) s += 4 * r.capacity();
    for (const auto& r : h.q_pre) s += 4 * r.capacity();
    s += 8 * h.q_pre_pos.capacity();
  }
  return s;
}

}  // namespace kvtrim::kv
