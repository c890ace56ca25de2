#include "kvtrim/bench_repeat.h"

#include <algorithm>

namespace kvtrim {

bool RepeatUntilResolved::Resolved(const std::vector<int64_t>& spans) const {
  for (int64_t s : spans)
    if (s < clock_.Span(lim_.min_steps)) return false;
  return true;
}

int RepeatUntilResolved::NextK(int k, const std::vector<int64_t>& spans, int cap) const {
  int64_t shortest = spans.empty() ? 0 : *std::min_element(spans.begin(), spans.end());
  int64_t next = int64_t{k} * 4;  // a section that read 0: no estimate yet
  if (shortest > 0) {
    const double want = 1.25 * static_cast<double>(clock_.Span(lim_.min_steps)) / shortest;
    next = std::min<int64_t>(int64_t{k} * 64, static_cast<int64_t>(k * want) + 1);
  }
  return static_cast<int>(std::clamp<int64_t>(next, k + 1, cap));
}

Expected<RepeatedTiming> RepeatUntilResolved::Measure(const std::function<Expected<BatchTiming>(int k)>& batch) {
  const int64_t start = clock_.now();
  std::vector<int64_t> sum;  // batches at the bound, summed
  int sum_reps = 0, k = k_;
  for (;;) {
    auto b = batch(k);
    if (!b.ok()) return b.error();
    const BatchTiming& t = b.value();
    const size_t bytes = std::max<size_t>(1, t.bytes_per_rep);
    const int cap = static_cast<int>(std::clamp<size_t>(lim_.max_batch_bytes / bytes, 1, lim_.max_k));
    const bool out_of_time = clock_.now() - start >= static_cast<int64_t>(lim_.max_wall_s * 1e9);
    if (sum_reps == 0 && (Resolved(t.spans_ns) || k >= cap || out_of_time)) {
      sum = t.spans_ns, sum_reps = k;  // this batch alone is the figure (or the first at the bound)
    } else if (sum_reps == 0) {
      k = NextK(k, t.spans_ns, cap);  // too short: discard and grow
      continue;
    } else {
      for (size_t i = 0; i < sum.size() && i < t.spans_ns.size(); ++i) sum[i] += t.spans_ns[i];
      sum_reps += k;
    }
    if (Resolved(sum) || clock_.now() - start >= static_cast<int64_t>(lim_.max_wall_s * 1e9)) break;
  }
  k_ = k;
  RepeatedTiming r;
  r.reps = sum_reps;
  r.resolved = Resolved(sum);
  for (int64_t s : sum) r.ns_per_rep.push_back(static_cast<double>(s) / sum_reps);
  return r;
}

}  // namespace kvtrim
