// Test helpers: the built-in taps' values on a head's statistics, read (an
// empty vector when the tap is absent) or planted by hand.
#pragma once
#include <memory>
#include <vector>

#include "kv/stats.h"
#include "kv/taps/history.h"
#include "kv/taps/last_access.h"
#include "kv/taps/mass.h"
#include "kv/taps/recent_rows.h"
#include "kv/taps/window_mass.h"

namespace kvtrim::kv::taptest {

inline std::vector<float> Mass(const HeadStats& h) {
  const auto* s = h.taps.Get<MassStat>(kMassTap);
  return s ? s->values() : std::vector<float>{};
}
inline std::vector<float> WindowMass(const HeadStats& h) {
  const auto* s = h.taps.Get<WindowMassStat>(kWindowMassTap);
  return s ? s->values() : std::vector<float>{};
}
inline std::vector<int64_t> LastAccess(const HeadStats& h) {
  const auto* s = h.taps.Get<LastAccessStat>(kLastAccessTap);
  return s ? s->values() : std::vector<int64_t>{};
}
inline int64_t HistoryCount(const AttentionStats& st, int layer, int head, int i) {
  const auto* s = st.head(layer, head).taps.Get<HistoryStat>(kHistoryTap);
  return s ? s->Count(i) : 0;
}
inline std::vector<double> RecentMass(const AttentionStats& st, int layer, int head, int n) {
  const auto* s = st.head(layer, head).taps.Get<RecentRowsStat>(kRecentRowsTap);
  return s ? s->Mass(n, st.step()) : std::vector<double>(n, 0.0);
}
inline int RecentQueries(const AttentionStats& st, int layer, int head) {
  const auto* s = st.head(layer, head).taps.Get<RecentRowsStat>(kRecentRowsTap);
  return s ? s->Queries(st.step()) : 0;
}

inline void PlantMass(HeadStats& h, std::vector<float> v) {
  h.taps.Take(kMassTap);
  h.taps.Add(kMassTap, std::make_unique<MassStat>(std::move(v)));
}
inline void PlantWindowMass(HeadStats& h, int window, std::vector<float> v) {
  h.taps.Take(kWindowMassTap);
  h.taps.Add(kWindowMassTap, std::make_unique<WindowMassStat>(window, std::move(v)));
}
inline void PlantLastAccess(HeadStats& h, std::vector<int64_t> v) {
  h.taps.Take(kLastAccessTap);
  h.taps.Add(kLastAccessTap, std::make_unique<LastAccessStat>(std::move(v)));
}

}  // namespace kvtrim::kv::taptest
