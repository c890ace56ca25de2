// The tap registry (taps.h): the built-in taps, one file each under taps/,
// and those registered at run time.
#include "kv/taps.h"

#include <mutex>

#include "kv/taps/history.h"
#include "kv/taps/last_access.h"
#include "kv/taps/latest_query.h"
#include "kv/taps/mass.h"
#include "kv/taps/max_prob.h"
#include "kv/taps/max_prob_over_h.h"
#include "kv/taps/recent_rows.h"
#include "kv/taps/window_mass.h"

namespace kvtrim::kv {

namespace {

struct TapRegistry {
  TapRegistry() {
    for (TapInfo (*info)() : {MassTapInfo, WindowMassTapInfo, LastAccessTapInfo, HistoryTapInfo, RecentRowsTapInfo,
                               LatestQueryTapInfo, MaxProbTapInfo, MaxProbOverHTapInfo})
      taps.push_back(std::make_unique<TapInfo>(info()));
  }
  std::mutex mu;
  // Each TapInfo stays where it was made (FindTap hands out pointers).
  std::vector<std::unique_ptr<TapInfo>> taps;
};

TapRegistry& Taps() {
  static TapRegistry r;
  return r;
}

}  // namespace

Status RegisterTap(TapInfo info) {
  if (info.name.empty()) return MakeError("a tap needs a name");
  if (!info.make) return MakeError("tap '" + info.name + "' has no factory");
  if (info.last_queries < 0) return MakeError("tap '" + info.name + "': last_queries is negative");
  TapRegistry& r = Taps();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const auto& t : r.taps)
    if (t->name == info.name) return MakeError("tap '" + info.name + "' is registered already");
  r.taps.push_back(std::make_unique<TapInfo>(std::move(info)));
  return {};
}

const TapInfo* FindTap(const std::string& name) {
  TapRegistry& r = Taps();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const auto& t : r.taps)
    if (t->name == name) return t.get();
  return nullptr;
}

Status CheckTaps(const std::vector<TapUse>& uses) {
  for (const TapUse& u : uses)
    if (!FindTap(u.name)) return MakeError("unknown statistic tap '" + u.name + "'");
  return {};
}

bool CoversTaps(const std::vector<TapUse>& have, const std::vector<TapUse>& want) {
  for (const TapUse& u : want)
    if (std::find(have.begin(), have.end(), u) == have.end()) return false;
  return true;
}

Status MergeTaps(std::vector<TapUse>* into, const std::vector<TapUse>& more, const std::string& policy) {
  for (const TapUse& u : more) {
    auto same = std::find_if(into->begin(), into->end(), [&](const TapUse& t) { return t.name == u.name; });
    if (same == into->end()) {
      into->push_back(u);
    } else if (same->param != u.param) {
      const TapInfo* info = FindTap(u.name);
      const std::string what = info && !info->param_name.empty() ? info->param_name : "'" + u.name + "' parameter";
      return MakeError("policy '" + policy + "' needs another " + what + " than the others forked from this session");
    }
  }
  return {};
}

TapSet& TapSet::operator=(const TapSet& o) {
  if (this == &o) return *this;
  items_.clear();
  for (const auto& [name, s] : o.items_) items_.emplace_back(name, s ? s->Clone() : nullptr);
  return *this;
}

std::unique_ptr<EntryStat> TapSet::Take(const std::string& name) {
  for (auto it = items_.begin(); it != items_.end(); ++it)
    if (it->first == name) {
      std::unique_ptr<EntryStat> s = std::move(it->second);
      items_.erase(it);
      return s;
    }
  return nullptr;
}

EntryStat* TapSet::Find(const std::string& name) const {
  for (const auto& [n, s] : items_)
    if (n == name) return s.get();
  return nullptr;
}

}  // namespace kvtrim::kv
