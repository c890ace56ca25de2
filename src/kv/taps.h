// Statistics a policy declares and owns: named taps in one registry. A
// policy lists the taps it needs (StatsNeeds::taps); each (layer, KV head)
// then holds one EntryStat per tap, which AttentionStats feeds the attention
// tiles and keeps aligned with the head's entries when a plan evicts or
// merges. Adding a statistic is a subclass, a registration and the policy
// that reads it: the cache's bookkeeping (stats.cpp) does not change.
#pragma once
#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kv/attention_tap.h"
#include "kvtrim/status.h"

namespace kvtrim::kv {

// Where a tile's queries stand: query t of the tile is at logical position
// pos0 + t, the batch's last query at `latest`; the prompt being prefilled
// ends at `prompt_end` (-1: not known, e.g. a reference pass). For a tap
// that asks (TapInfo::hidden_norms), hidden_norm[t] is ||h_t|| of the tile's
// query t (AttentionTap::OnHiddenNorms); null otherwise.
struct TapClock {
  int64_t pos0 = 0;
  int64_t latest = 0;
  int64_t prompt_end = -1;
  const float* hidden_norm = nullptr;
};

// One (layer, KV head)'s state of one statistic, aligned with its entries.
class EntryStat {
 public:
  virtual ~EntryStat() = default;
  // A tile of the group's probabilities (AttentionTap::OnProbTile). Entries
  // past those seen so far are new (the stat grows).
  virtual void OnTile(const ProbTile& tile, const TapClock& clock) = 0;
  // A prefill chunk begins (--prefill-chunk): a statistic of the prompt's
  // last queries (SnapKV's window) starts afresh; most keep what they hold.
  virtual void StartChunk() {}
  // An eviction-only plan kept `keep` (increasing); kept entries the stat has
  // not seen yet start fresh.
  virtual void Retain(const std::vector<int>& keep) = 0;
  // A plan that merges or adds: entry j now combines the old entries from[j].
  virtual void Rebuild(const std::vector<std::vector<int>>& from) = 0;
  virtual size_t BytesHeld() const = 0;
  virtual std::unique_ptr<EntryStat> Clone() const = 0;
};

// For an EntryStat holding one value per entry (v[i]: entry i; entries
// past v.size() not seen yet). RetainEntries keeps `keep` (increasing) in
// place, kept entries not seen yet start at `fresh`, and gives memory back
// after a large eviction. RebuildEntries makes out[j] by folding `combine`
// over the sources from[j] it has seen, from `init`.
template <class T>
void RetainEntries(std::vector<T>& v, const std::vector<int>& keep, T fresh) {
  size_t w = 0;  // keep increases: the entries seen come first
  for (int i : keep) {
    if (static_cast<size_t>(i) >= v.size()) break;
    v[w++] = v[i];
  }
  v.resize(w);
  v.resize(keep.size(), fresh);
  if (v.capacity() > v.size() + v.size() / 8 + 64) v.shrink_to_fit();
}

template <class T, class Combine>
std::vector<T> RebuildEntries(const std::vector<T>& v, const std::vector<std::vector<int>>& from, T init,
                              Combine combine) {
  std::vector<T> out(from.size(), init);
  for (size_t j = 0; j < from.size(); ++j)
    for (int i : from[j])
      if (static_cast<size_t>(i) < v.size()) out[j] = combine(out[j], v[i]);
  return out;
}

// A tap a policy asks for: its name and, for a tap that takes one, its
// parameter (a window length, a history length; 0 otherwise). Two policies
// forked from one session share a tap only with the same parameter.
struct TapUse {
  std::string name;
  int param = 0;
  TapUse(const char* n) : name(n) {}  // NOLINT: a bare name is a use without parameter
  TapUse(std::string n, int p = 0) : name(std::move(n)), param(p) {}  // NOLINT
  bool operator==(const TapUse&) const = default;
};

struct TapShape {
  int group = 1;     // query heads per KV head
  int head_dim = 0;
  int param = 0;     // TapUse::param
};

struct TapInfo {
  std::string name;
  // The queries of a batch the tap reads: 0 every one, w > 0 only the last w
  // (the model may then skip the tiles of earlier queries).
  int last_queries = 0;
  std::function<std::unique_ptr<EntryStat>(const TapShape&)> make;
  // Optional, overrides last_queries: the first query position the tap
  // reads, from its parameter and the clock (INT64_MAX: none).
  std::function<int64_t(int param, const TapClock& clock)> reads_from = {};
  // What the parameter is, for errors ("observation window"); empty: none.
  std::string param_name = {};
  // Reads TapClock::hidden_norm (the model then reports the norms).
  bool hidden_norms = false;
};

// Registers a tap beside the built-in ones (tests, embedders); a name taken
// already, an empty name or no factory is an error. Thread-safe.
Status RegisterTap(TapInfo info);
// The registered tap of that name, or null.
const TapInfo* FindTap(const std::string& name);
// Checks that every name is a registered tap.
Status CheckTaps(const std::vector<TapUse>& uses);
// Whether taps collected for `have` serve a policy asking for `want` (each
// use present with its parameter).
bool CoversTaps(const std::vector<TapUse>& have, const std::vector<TapUse>& want);
// Adds `more` to `into`; a tap asked for with another parameter than it has
// there is an error naming `policy` and what the parameter is.
Status MergeTaps(std::vector<TapUse>* into, const std::vector<TapUse>& more, const std::string& policy);

// The stats of one head, by tap name; a copy clones them (forked sessions).
class TapSet {
 public:
  TapSet() = default;
  TapSet(const TapSet& o) { *this = o; }
  TapSet& operator=(const TapSet& o);
  TapSet(TapSet&&) noexcept = default;
  TapSet& operator=(TapSet&&) noexcept = default;

  void Add(const std::string& name, std::unique_ptr<EntryStat> s) { items_.emplace_back(name, std::move(s)); }
  EntryStat* Find(const std::string& name) const;
  // Removes the stat of that name and hands it over (null when absent).
  std::unique_ptr<EntryStat> Take(const std::string& name);
  // The stat of that name as its concrete type (null when absent or another type).
  template <class T>
  const T* Get(const std::string& name) const {
    return dynamic_cast<const T*>(Find(name));
  }
  bool empty() const { return items_.empty(); }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  std::vector<std::pair<std::string, std::unique_ptr<EntryStat>>> items_;
};

}  // namespace kvtrim::kv
