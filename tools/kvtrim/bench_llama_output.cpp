#include "bench_llama_output.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

#include "kvtrim/clock.h"

namespace kvtrim::cli {
namespace {

std::string Fmt(const char* f, double a, double b = 0) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, a, b);
  return buf;
}

std::string Pad(const std::string& s, int w, bool right) {
  if (static_cast<int>(s.size()) >= w) return s;
  const std::string sp(w - s.size(), ' ');
  return right ? sp + s : s + sp;
}

std::string NowUtc() {
  std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

}  // namespace

std::string LlamaBenchMarkdown(const LlamaBenchMeta& m, const std::vector<LlamaBenchTest>& tests) {
  std::string s = "| model                          |       size |     params | backend    | threads |          test |                  t/s |\n"
                  "| ------------------------------ | ---------: | ---------: | ---------- | ------: | ------------: | -------------------: |\n";
  for (const auto& t : tests) {
    s += "| " + Pad(m.model_type, 30, false) + " | " + Pad(Fmt("%.2f MiB", m.model_size / 1048576.0), 10, true) +
         " | " + Pad(Fmt("%.2f M", m.model_n_params / 1e6), 10, true) + " | " + Pad("CPU", 10, false) + " | " +
         Pad(std::to_string(m.n_threads), 7, true) + " | " + Pad(t.name(), 13, true) + " | " +
         Pad(Fmt("%.2f ± %.2f", t.avg_ts(), t.stddev_ts()), 20, true) + " |\n";
  }
  s += "\nbuild: kvtrim (" + m.kernels + " kernels)\n";
  s += "clock step " + FormatStep(SteadyClock().step_ns) + ": each sample spans >= " +
       std::to_string(kMinClockSteps) + " steps (runs repeated as needed)";
  for (const auto& t : tests)
    if (t.below_resolution) s += "; " + t.name() + " below the clock's resolution";
  s += "\n";
  return s;
}

std::string LlamaBenchJson(const LlamaBenchMeta& m, const std::vector<LlamaBenchTest>& tests) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& t : tests) {
    j.push_back({{"build_commit", "kvtrim"}, {"cpu_info", ""}, {"backends", "CPU"}, {"kernels", m.kernels},
                 {"model_filename", m.model_filename}, {"model_type", m.model_type},
                 {"model_size", m.model_size}, {"model_n_params", m.model_n_params}, {"n_threads", m.n_threads},
                 {"type_k", m.type_kv}, {"type_v", m.type_kv}, {"n_prompt", t.n_prompt}, {"n_gen", t.n_gen},
                 {"n_depth", t.n_depth}, {"test_time", NowUtc()},
                 {"avg_ns", static_cast<uint64_t>(t.avg_ns())}, {"stddev_ns", static_cast<uint64_t>(t.stddev_ns())},
                 {"avg_ts", t.avg_ts()}, {"stddev_ts", t.stddev_ts()}, {"samples_ns", t.samples_ns},
                 {"samples_ts", t.samples_ts()}, {"samples_reps", t.samples_reps},
                 {"clock_step_ns", SteadyClock().step_ns}, {"below_clock_resolution", t.below_resolution}});
  }
  return j.dump(2) + "\n";
}

}  // namespace kvtrim::cli
