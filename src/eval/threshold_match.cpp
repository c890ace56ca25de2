#include "eval/threshold_match.h"

#include "engine/engine_impl.h"

#include <cmath>

#include "kv/cache.h"

namespace kvtrim::eval {

bool MethodThreshold(const std::string& method) {
  const size_t n = sizeof(kThresholdSuffix) - 1;
  return method.size() > n && method.compare(method.size() - n, n, kThresholdSuffix) == 0;
}

namespace {

// The mean share of entries held after compression at threshold T.
Expected<double> HeldAt(const std::vector<std::unique_ptr<Session>>& bases, KvOptions kv, double T) {
  kv.threshold = T;
  double sum = 0;
  for (const auto& b : bases) {
    auto s = b->Fork(kv);
    if (!s.ok()) return s.error();
    KVTRIM_RETURN_IF_ERROR(s.value()->Compress());
    const kv::KvCache& c = s.value()->impl().cache();
    sum += static_cast<double>(c.EntriesHeld()) / (static_cast<double>(c.n_layer()) * c.n_head_kv() * b->position());
  }
  return sum / static_cast<double>(bases.size());
}

// Bisection in log T over [1e-4, 1e4]: the held share falls as T grows.
Expected<ThresholdMatch> Bisect(const std::vector<std::unique_ptr<Session>>& bases, const KvOptions& kv, double ratio) {
  double lo = std::log(1e-4), hi = std::log(1e4);
  ThresholdMatch best{std::exp(hi), 2.0};
  for (int it = 0; it < 28; ++it) {
    const double mid = 0.5 * (lo + hi);
    auto held = HeldAt(bases, kv, std::exp(mid));
    if (!held.ok()) return held.error();
    if (std::abs(held.value() - ratio) < std::abs(best.held - ratio)) best = {std::exp(mid), held.value()};
    (held.value() > ratio ? lo : hi) = mid;
  }
  return best;
}

}  // namespace

Expected<std::vector<ThresholdMatch>> MatchThreshold(const Engine& e, KvOptions kv, const std::vector<double>& ratios,
                                                     const std::vector<std::vector<int>>& contexts) {
  if (contexts.empty()) return MakeError("threshold matching: no calibration contexts");
  for (double r : ratios)
    if (!(r > 0 && r <= 1)) return MakeError("threshold matching: ratio outside (0, 1]");
  kv.ratio = 1, kv.ratio_explicit = false;  // the threshold decides
  std::vector<std::unique_ptr<Session>> bases;
  for (const auto& t : contexts) {
    SessionOptions so;  // the full cache, collecting what the policy reads
    so.fork_targets = {kv};
    so.fork_targets[0].threshold = 1;
    auto s = Session::Create(e, so);
    if (!s.ok()) return s.error();
    KVTRIM_RETURN_IF_ERROR(s.value()->Prefill(t));
    bases.push_back(std::move(s.value()));
  }
  std::vector<ThresholdMatch> out;
  for (double r : ratios) {
    auto m = Bisect(bases, kv, r);
    if (!m.ok()) return m.error();
    out.push_back(m.value());
  }
  return out;
}

}  // namespace kvtrim::eval
