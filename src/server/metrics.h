// Counters of `kvtrim serve`, rendered as Prometheus text (GET /metrics).
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace kvtrim::server {

class Metrics {
 public:
  // One finished request: its route and HTTP status.
  void CountRequest(const std::string& route, int status);
  void AddTokens(int64_t prompt, int64_t completion) {
    prompt_tokens_ += prompt;
    completion_tokens_ += completion;
  }
  // A completion stopped early because its client went away.
  void CountAbandoned() { ++abandoned_; }
  int64_t abandoned() const { return abandoned_.load(); }
  // KV bytes of the live sessions (requests running now): add a change.
  void AddLiveKv(int64_t delta) { live_kv_bytes_ += delta; }
  int64_t live_kv_bytes() const { return live_kv_bytes_.load(); }
  // The most KV bytes one request's or context's session held at once
  // (Session::peak_kv_bytes): the gauge keeps the largest seen.
  void NoteKvPeak(size_t bytes) {
    int64_t b = static_cast<int64_t>(bytes), cur = kv_peak_bytes_.load();
    while (b > cur && !kv_peak_bytes_.compare_exchange_weak(cur, b)) {
    }
  }

  // The gauges the server reads when rendering.
  struct Gauges {
    int queue_depth = 0, active = 0, parallel = 0;
    int64_t rejected = 0;
    size_t store_bytes = 0, store_capacity = 0, store_contexts = 0;
    int64_t store_evicted = 0;
  };
  std::string Render(const Gauges& g) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> requests_;
  std::atomic<int64_t> prompt_tokens_{0}, completion_tokens_{0}, live_kv_bytes_{0}, kv_peak_bytes_{0},
      abandoned_{0};
};

// Resident set size of this process now and at its peak (/proc/self/status
// VmRSS, VmHWM), in bytes; 0 where unavailable.
size_t CurrentRssBytes();
size_t PeakRssBytesNow();

}  // namespace kvtrim::server
