#include "serve_soak.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

namespace kvtrim::cli {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Sample {
  double t_s, ms;
  std::string route;
  int status;  // 0: no answer (connection failed)
};

double Pct(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(std::min<double>(v.size() - 1, std::ceil(q * v.size()) - 1))];
}

double Metric(const std::string& text, const std::string& name) {
  std::istringstream is(text);
  std::string line;
  while (std::getline(is, line))
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  return -1;
}

class Recorder {
 public:
  explicit Recorder(Clock::time_point t0) : t0_(t0) {}
  // Runs one request, records it; the response (null when none came).
  httplib::Result Run(const std::string& route, const std::function<httplib::Result()>& f) {
    const auto t = Clock::now();
    auto r = f();
    const auto end = Clock::now();
    std::lock_guard<std::mutex> lk(mu_);
    samples_.push_back({std::chrono::duration<double>(end - t0_).count(),
                        std::chrono::duration<double, std::milli>(end - t).count(), route, r ? r->status : 0});
    return r;
  }
  std::vector<Sample> Take() {
    std::lock_guard<std::mutex> lk(mu_);
    return samples_;
  }

 private:
  Clock::time_point t0_;
  std::mutex mu_;
  std::vector<Sample> samples_;
};

// One client: create, ask, delete, until the deadline. Counts the contexts
// it made and those that answered 404 to it (lost).
void Client(const SoakOpts& o, const std::vector<std::string>& texts, int k, Clock::time_point deadline,
            Recorder& rec, std::atomic<int64_t>& made, std::atomic<int64_t>& lost) {
  httplib::Client c(o.host, o.port);
  c.set_read_timeout(600, 0);
  for (int i = 0; Clock::now() < deadline; ++i) {
    json body{{"text", texts[static_cast<size_t>(k + i) % texts.size()]}, {"kv", o.kv}, {"kv_ratio", o.ratio}};
    auto r = rec.Run("POST /v1/contexts", [&] { return c.Post("/v1/contexts", body.dump(), "application/json"); });
    if (!r || r->status != 200) continue;
    ++made;
    const std::string id = json::parse(r->body)["id"];
    bool gone = false;
    for (int q = 0; q < o.questions && !gone; ++q) {
      json qb{{"context_id", id}, {"prompt", "\nQuestion " + std::to_string(q + 1) + ": what happened next?\nAnswer:"},
              {"max_tokens", o.max_tokens}, {"temperature", 0.8}, {"seed", k * 100000 + i * 100 + q}};
      auto a = rec.Run("POST /v1/completions", [&] { return c.Post("/v1/completions", qb.dump(), "application/json"); });
      gone = a && a->status == 404;
    }
    auto d = rec.Run("DELETE /v1/contexts/{id}", [&] { return c.Delete(("/v1/contexts/" + id).c_str()); });
    if (gone || (d && d->status == 404)) ++lost;
  }
}

}  // namespace

Expected<json> RunSoak(const SoakOpts& o, const std::vector<std::string>& texts) {
  if (texts.empty()) return MakeError("no context text");
  const auto t0 = Clock::now();
  const auto deadline = t0 + std::chrono::milliseconds(static_cast<int64_t>(o.minutes * 60000));
  Recorder rec(t0);
  std::atomic<int64_t> made{0}, lost{0};
  std::vector<std::thread> th;
  for (int k = 0; k < o.clients; ++k)
    th.emplace_back([&, k] { Client(o, texts, k, deadline, rec, made, lost); });
  json rss = json::array();  // the server's RSS and store, sampled every interval
  httplib::Client m(o.host, o.port);
  for (int tick = 0;; ++tick) {
    auto r = m.Get("/metrics");
    if (r && r->status == 200)
      rss.push_back({{"t_s", std::chrono::duration<double>(Clock::now() - t0).count()},
                     {"rss_mib", Metric(r->body, "kvtrim_resident_memory_bytes") / 1048576.0},
                     {"stored_contexts", Metric(r->body, "kvtrim_stored_contexts")}});
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_until(std::min(deadline, t0 + std::chrono::seconds(int64_t{o.interval_s} * (tick + 1))));
  }
  for (auto& t : th) t.join();
  const std::vector<Sample> all = rec.Take();
  std::map<std::string, std::map<int, int64_t>> by_status;
  for (const Sample& s : all) ++by_status[s.route][s.status];
  json intervals = json::array();
  const int n_int = static_cast<int>(std::ceil(o.minutes * 60 / o.interval_s));
  for (int i = 0; i < n_int; ++i) {
    std::vector<double> ms;
    int64_t errors = 0;
    for (const Sample& s : all)
      if (s.t_s >= i * o.interval_s && s.t_s < (i + 1) * o.interval_s) {
        if (s.status == 200 && s.route == "POST /v1/completions") ms.push_back(s.ms);
        if (s.status != 200) ++errors;
      }
    intervals.push_back({{"from_s", i * o.interval_s}, {"questions", ms.size()}, {"errors", errors},
                         {"p50_ms", Pct(ms, 0.5)}, {"p99_ms", Pct(ms, 0.99)}});
  }
  json statuses = json::object();
  for (const auto& [route, m2] : by_status)
    for (const auto& [st, n] : m2) statuses[route][st == 0 ? "no answer" : std::to_string(st)] = n;
  return json{{"minutes", o.minutes}, {"clients", o.clients}, {"questions_per_context", o.questions},
              {"max_tokens", o.max_tokens}, {"kv", o.kv}, {"ratio", o.ratio}, {"requests", all.size()},
              {"by_route_and_status", statuses}, {"contexts_made", made.load()}, {"contexts_lost", lost.load()},
              {"intervals", intervals}, {"server", rss}};
}

std::string SoakMarkdown(const json& rep) {
  std::ostringstream md;
  char b[256];
  md << "Soak: " << rep["minutes"] << " min, " << rep["clients"] << " clients, each: create a context, "
     << rep["questions_per_context"] << " questions of " << rep["max_tokens"] << " tokens, delete (" << rep["kv"].get<std::string>()
     << " " << rep["ratio"] << "). " << rep["requests"] << " requests; contexts made " << rep["contexts_made"]
     << ", lost " << rep["contexts_lost"] << ".\n\n| route | status | count |\n|---|---|---|\n";
  for (const auto& [route, m] : rep["by_route_and_status"].items())
    for (const auto& [st, n] : m.items()) md << "| " << route << " | " << st << " | " << n << " |\n";
  md << "\n| from s | questions | errors | p50 ms | p99 ms |\n|---|---|---|---|---|\n";
  for (const auto& r : rep["intervals"]) {
    std::snprintf(b, sizeof b, "| %d | %lld | %lld | %.0f | %.0f |\n", r["from_s"].get<int>(),
                  static_cast<long long>(r["questions"].get<int64_t>()), static_cast<long long>(r["errors"].get<int64_t>()),
                  r["p50_ms"].get<double>(), r["p99_ms"].get<double>());
    md << b;
  }
  md << "\n| t s | server RSS MiB | stored contexts |\n|---|---|---|\n";
  for (const auto& r : rep["server"]) {
    std::snprintf(b, sizeof b, "| %.0f | %.1f | %.0f |\n", r["t_s"].get<double>(), r["rss_mib"].get<double>(),
                  r["stored_contexts"].get<double>());
    md << b;
  }
  return md.str();
}

}  // namespace kvtrim::cli
