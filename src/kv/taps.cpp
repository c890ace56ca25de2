// The tap registry (taps.h): the built-in taps, one file each under taps/,
// and those registered at run time.
#include "kv/taps.h"

#include <mutex>

#include "kv/taps/latest_query.h"
#include "kv/taps/max_prob.h"

namespace kvtrim::kv {

namespace {

struct Registry {
  Registry() {
    taps.push_back(std::make_unique<TapInfo>(LatestQueryTapInfo()));
    taps.push_back(std::make_unique<TapInfo>(MaxProbTapInfo()));
  }
  std::mutex mu;
  // Each TapInfo stays where it was made (FindTap hands out pointers).
  std::vector<std::unique_ptr<TapInfo>> taps;
};

Registry& Taps() {
  static Registry r;
  return r;
}

}  // namespace

Status RegisterTap(TapInfo info) {
  if (info.name.empty()) return MakeError("a tap needs a name");
  if (!info.make) return MakeError("tap '" + info.name + "' has no factory");
  if (info.last_queries < 0) return MakeError("tap '" + info.name + "': last_queries is negative");
  Registry& r = Taps();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const auto& t : r.taps)
    if (t->name == info.name) return MakeError("tap '" + info.name + "' is registered already");
  r.taps.push_back(std::make_unique<TapInfo>(std::move(info)));
  return {};
}

const TapInfo* FindTap(const std::string& name) {
  Registry& r = Taps();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const auto& t : r.taps)
    if (t->name == name) return t.get();
  return nullptr;
}

Status CheckTaps(const std::vector<std::string>& names) {
  for (const std::string& n : names)
    if (!FindTap(n)) return MakeError("unknown statistic tap '" + n + "'");
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
