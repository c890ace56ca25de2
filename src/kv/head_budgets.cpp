#include "kvtrim/head_budgets.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

namespace kvtrim {

namespace {

std::string Num(double x) {  // 0.05, not 0.050000
  char b[32];
  std::snprintf(b, sizeof b, "%g", x);
  return b;
}

}  // namespace

std::vector<double> DefaultRatioGrid(double r) {
  std::vector<double> g;
  for (double f : {0.25, 0.5, 1.0, 2.0, 4.0}) {
    const double x = std::min(1.0, r * f);
    if (x > 0 && (g.empty() || x > g.back())) g.push_back(x);
  }
  return g;
}

double InterpolateLoss(const HeadSensitivity& s, int h, double x) {
  const std::vector<double>& R = s.ratios;
  const std::vector<double>& L = s.loss[h];
  if (x <= R.front()) return L.front();
  for (size_t i = 1; i < R.size(); ++i)
    if (x <= R[i]) return L[i - 1] + (L[i] - L[i - 1]) * (x - R[i - 1]) / (R[i] - R[i - 1]);
  if (R.back() >= 1.0) return L.back();
  return L.back() + (0.0 - L.back()) * (x - R.back()) / (1.0 - R.back());  // to 0 at ratio 1
}

HeadSensitivity NonIncreasing(HeadSensitivity s) {
  for (auto& l : s.loss)
    for (size_t i = l.size(); i-- > 1;) l[i - 1] = std::max(l[i - 1], l[i]);
  return s;
}

Expected<std::vector<int>> SearchHeadBudgets(const HeadSensitivity& s, const HeadBudgetOptions& o) {
  const int H = static_cast<int>(s.loss.size());
  if (H == 0 || s.ratios.empty()) return MakeError("head budgets: no heads or no ratios measured");
  for (size_t i = 0; i < s.ratios.size(); ++i)
    if (!(s.ratios[i] > 0 && s.ratios[i] <= 1) || (i && s.ratios[i] <= s.ratios[i - 1]))
      return MakeError("head budgets: ratios must increase within (0, 1]");
  for (const auto& l : s.loss)
    if (l.size() != s.ratios.size()) return MakeError("head budgets: a head has " + std::to_string(l.size()) +
                                                      " losses for " + std::to_string(s.ratios.size()) + " ratios");
  const int U = o.units_per_head;
  if (U < 1 || o.min_units < 0 || o.min_units > U) return MakeError("head budgets: bad unit settings");
  const int total = static_cast<int>(std::lround(o.ratio * U * H));
  if (total < o.min_units * H) return MakeUnreachable("head budgets: ratio " + std::to_string(o.ratio) +
                                                      " is below the per-head minimum of " + std::to_string(o.min_units) + " units");
  // No head goes below the smallest share whose loss was measured: below it
  // the curve is not known (InterpolateLoss would call it flat, and draining
  // a head there would look free).
  if (o.ratio < s.ratios.front() - 1e-12)
    return MakeUnreachable("head budgets: ratio " + Num(o.ratio) + " is below the smallest measured ratio " +
                           Num(s.ratios.front()) + " (measure at a lower --head-budget-ratio: the curves start at a "
                           "quarter of it)");
  const int floor_units =
      std::max(o.min_units, std::min(total / H, static_cast<int>(std::ceil(s.ratios.front() * U - 1e-9))));
  std::vector<int> u(H, total / H);
  for (int h = 0; h < total % H; ++h) ++u[h];
  auto cost = [&](int h, int units) { return InterpolateLoss(s, h, static_cast<double>(units) / U); };
  for (int guard = 0; guard < total * H + 1; ++guard) {
    double best = -1e-12;
    int from = -1, to = -1;
    for (int d = 0; d < H; ++d) {
      if (u[d] - 1 < floor_units) continue;
      const double give = cost(d, u[d] - 1) - cost(d, u[d]);  // loss added at the donor
      for (int r = 0; r < H; ++r) {
        if (r == d || u[r] + 1 > U) continue;
        const double delta = give + cost(r, u[r] + 1) - cost(r, u[r]);
        if (delta < best) best = delta, from = d, to = r;
      }
    }
    if (from < 0) break;
    --u[from];
    ++u[to];
  }
  return u;
}

Expected<std::vector<int>> UnitsAtRatio(const StoredHeadBudgets& b, double r) {
  if (std::abs(r - b.ratio) <= 1e-9 * std::max(1.0, b.ratio)) return b.units;
  if (b.sensitivity.ratios.empty())
    return MakeError("head budgets: the profile's were searched at ratio " + Num(b.ratio) +
                     " and it stores no loss curves to search again at " + Num(r) +
                     " (measure again with `kvtrim profile --head-budgets --head-budget-ratio " + Num(r) + "`)");
  HeadBudgetOptions o;
  o.ratio = r;
  o.units_per_head = b.units_per_head;
  return SearchHeadBudgets(NonIncreasing(b.sensitivity), o);
}

namespace {

nlohmann::json HeadBudgetsToJson(const StoredHeadBudgets& b) {
  return {{"ratio", b.ratio},
          {"units_per_head", b.units_per_head},
          {"units", b.units},
          {"ratios", b.sensitivity.ratios},
          {"loss", b.sensitivity.loss},
          {"contexts", b.contexts},
          {"context_tokens", b.context_tokens},
          {"continuation_tokens", b.continuation_tokens},
          {"seed", b.seed},
          {"seconds", b.seconds}};
}

Expected<StoredHeadBudgets> HeadBudgetsFromJson(const nlohmann::json& j, int n_heads) {
  StoredHeadBudgets b;
  try {
    b.ratio = j.at("ratio").get<double>();
    b.units_per_head = j.at("units_per_head").get<int>();
    b.units = j.at("units").get<std::vector<int>>();
    b.sensitivity.ratios = j.value("ratios", std::vector<double>{});
    b.sensitivity.loss = j.value("loss", std::vector<std::vector<double>>{});
    b.contexts = j.value("contexts", 0);
    b.context_tokens = j.value("context_tokens", 0);
    b.continuation_tokens = j.value("continuation_tokens", 0);
    b.seed = j.value("seed", uint64_t{0});
    b.seconds = j.value("seconds", 0.0);
  } catch (const nlohmann::json::exception& e) {
    return MakeError(std::string("head budgets in the profile: ") + e.what());
  }
  if (!(b.ratio > 0 && b.ratio <= 1)) return MakeError("head budgets in the profile: ratio outside (0, 1]");
  if (b.units_per_head < 1) return MakeError("head budgets in the profile: units_per_head must be positive");
  if (static_cast<int>(b.units.size()) != n_heads)
    return MakeError("head budgets in the profile: " + std::to_string(b.units.size()) + " units for " +
                     std::to_string(n_heads) + " KV heads");
  int64_t sum = 0;
  for (int u : b.units) {
    if (u < 0 || u > b.units_per_head) return MakeError("head budgets in the profile: a head's units are out of range");
    sum += u;
  }
  if (sum <= 0) return MakeError("head budgets in the profile: no units");
  return b;
}

}  // namespace

void SetHeadBudgets(ModelProfile* p, const StoredHeadBudgets& b) { p->extra[kHeadBudgetsKey] = HeadBudgetsToJson(b).dump(); }

bool HasHeadBudgets(const ModelProfile& p) { return p.extra.count(kHeadBudgetsKey) > 0; }

Expected<StoredHeadBudgets> HeadBudgetsOf(const ModelProfile& p, int n_heads) {
  const auto it = p.extra.find(kHeadBudgetsKey);
  if (it == p.extra.end()) return MakeError("the profile has no head budgets");
  const nlohmann::json j = nlohmann::json::parse(it->second, nullptr, false);
  if (j.is_discarded()) return MakeError("head budgets in the profile: not valid JSON");
  return HeadBudgetsFromJson(j, n_heads);
}

}  // namespace kvtrim
