// Attention Matching compaction time against prefill time, per layer and in
// total, at several context lengths (issue 11's closing note):
//   kvtrim_am_timing MODEL HAYSTACK [ratio] [threads] [contexts...]
// Prefill of BOS + (N - 1) haystack tokens, then each am variant on a fork of
// the prefilled session: the reference pass (repeat) is the part of
// Session::Compress outside the compressor's own time.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "engine/engine_impl.h"
#include "io/tokenizer.h"
#include "kv/compressor.h"
#include "kv/policies/policies.h"
#include "kvtrim/engine.h"

using namespace kvtrim;
using Clock = std::chrono::steady_clock;

static double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL HAYSTACK [ratio] [threads] [contexts...]\n", argv[0]);
    return 2;
  }
  const double ratio = argc > 3 ? std::atof(argv[3]) : 0.1;
  const int threads = argc > 4 ? std::atoi(argv[4]) : 2;
  std::vector<int> contexts;
  for (int i = 5; i < argc; ++i) contexts.push_back(std::atoi(argv[i]));
  if (contexts.empty()) contexts = {512, 1024};
  auto e = Engine::Load({argv[1], threads});
  if (!e.ok()) return std::fprintf(stderr, "%s\n", e.error().message.c_str()), 1;
  std::ifstream f(argv[2]);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::vector<int> all = e.value()->impl().tokenizer().Encode(ss.str().substr(10000, 40000), true);
  struct Variant { const char* name; std::map<std::string, double> params; };
  const std::vector<Variant> variants = {{"highest/context", {{"am-queries", 0}}},
                                         {"highest/repeat", {{"am-queries", 1}, {"am-repeat-past-ctx", 1}}},
                                         {"omp/context", {{"am-queries", 0}, {"am-select", 1}}},
                                         {"omp/repeat", {{"am-queries", 1}, {"am-select", 1}, {"am-repeat-past-ctx", 1}}}};
  for (int n : contexts) {
    SessionOptions so;
    KvOptions am;
    am.policy = "am";
    am.ratio = ratio;
    so.fork_targets = {am};
    auto s = Session::Create(*e.value(), so);
    if (!s.ok()) return std::fprintf(stderr, "%s\n", s.error().message.c_str()), 1;
    const std::vector<int> toks(all.begin(), all.begin() + n);
    auto t0 = Clock::now();
    if (auto st = s.value()->Prefill(toks); !st.ok()) return std::fprintf(stderr, "%s\n", st.message().c_str()), 1;
    const double prefill = Since(t0);
    std::printf("context %d: prefill %.3f s (%.0f tok/s), ratio %.2f, %d threads\n", n, prefill, n / prefill, ratio, threads);
    for (const auto& v : variants) {
      KvOptions kv = am;
      kv.params = v.params;
      auto fk = s.value()->Fork(kv);
      if (!fk.ok()) return std::fprintf(stderr, "%s\n", fk.error().message.c_str()), 1;
      auto t1 = Clock::now();
      if (auto st = fk.value()->Compress(); !st.ok()) return std::fprintf(stderr, "%s\n", st.message().c_str()), 1;
      const double total = Since(t1);
      const auto& comp = fk.value()->impl().compressor();
      std::printf("  %-16s total %.3f s (%.2fx prefill): reference pass %.3f s, layers", v.name, total, total / prefill,
                  total - comp.compress_seconds());
      for (double l : comp.prefill_layer_seconds()) std::printf(" %.3f", l);
      auto& am_policy = dynamic_cast<kv::AmPolicy&>(fk.value()->impl().compressor().policy());
      std::printf(" s; entries %zu, zero-weight keys dropped %lld\n", fk.value()->impl().cache().EntriesHeld(),
                  static_cast<long long>(am_policy.dropped()));
    }
  }
  return 0;
}
