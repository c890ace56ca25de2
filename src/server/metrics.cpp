#include "server/metrics.h"

#include <fstream>
#include <sstream>

namespace kvtrim::server {

namespace {

size_t StatusField(const std::string& key) {  // "VmRSS:   1234 kB" -> bytes
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.compare(0, key.size(), key) != 0) continue;
    std::istringstream is(line.substr(key.size()));
    size_t kb = 0;
    is >> kb;
    return kb * 1024;
  }
  return 0;
}

void Line(std::ostringstream& os, const char* name, const char* type, const char* help, double v) {
  os << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n' << name << ' ' << v << '\n';
}

}  // namespace

size_t CurrentRssBytes() { return StatusField("VmRSS:"); }
size_t PeakRssBytesNow() { return StatusField("VmHWM:"); }

void Metrics::CountRequest(const std::string& route, int status) {
  std::lock_guard<std::mutex> lk(mu_);
  ++requests_[{route, status}];
}

std::string Metrics::Render(const Gauges& g) const {
  std::ostringstream os;
  os.precision(17);
  os << "# HELP kvtrim_requests_total Requests answered, by route and HTTP status\n"
        "# TYPE kvtrim_requests_total counter\n";
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (const auto& [k, n] : requests_)
      os << "kvtrim_requests_total{route=\"" << k.first << "\",status=\"" << k.second << "\"} " << n << '\n';
  }
  Line(os, "kvtrim_requests_rejected_total", "counter", "Requests refused with 503 (queue full)",
       static_cast<double>(g.rejected));
  Line(os, "kvtrim_prompt_tokens_total", "counter", "Prompt tokens prefilled", static_cast<double>(prompt_tokens_));
  Line(os, "kvtrim_completion_tokens_total", "counter", "Tokens generated", static_cast<double>(completion_tokens_));
  Line(os, "kvtrim_requests_abandoned_total", "counter", "Completions stopped because their client went away",
       static_cast<double>(abandoned_));
  Line(os, "kvtrim_queue_depth", "gauge", "Requests waiting for a decoding slot", g.queue_depth);
  Line(os, "kvtrim_active_requests", "gauge", "Requests holding a decoding slot", g.active);
  Line(os, "kvtrim_parallel", "gauge", "Decoding slots (--parallel)", g.parallel);
  Line(os, "kvtrim_kv_bytes_live_sessions", "gauge", "KV bytes held by the sessions of running requests",
       static_cast<double>(live_kv_bytes_));
  Line(os, "kvtrim_kv_bytes_peak_session", "gauge",
       "The most KV bytes one request's or stored context's session held at once (prefill, reference pass, decode)",
       static_cast<double>(kv_peak_bytes_));
  Line(os, "kvtrim_kv_bytes_stored_contexts", "gauge", "KV bytes held by the stored contexts",
       static_cast<double>(g.store_bytes));
  Line(os, "kvtrim_context_store_capacity_bytes", "gauge", "Context store bound (--context-store-mib)",
       static_cast<double>(g.store_capacity));
  Line(os, "kvtrim_stored_contexts", "gauge", "Contexts in the store", static_cast<double>(g.store_contexts));
  Line(os, "kvtrim_stored_contexts_evicted_total", "counter", "Contexts dropped to make room (least recently used)",
       static_cast<double>(g.store_evicted));
  Line(os, "kvtrim_resident_memory_bytes", "gauge", "Resident set size (VmRSS)", static_cast<double>(CurrentRssBytes()));
  Line(os, "kvtrim_peak_resident_memory_bytes", "gauge", "Peak resident set size (VmHWM)",
       static_cast<double>(PeakRssBytesNow()));
  return os.str();
}

}  // namespace kvtrim::server
