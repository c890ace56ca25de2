#include "engine/bench_llama.h"

#include <chrono>
#include <cmath>
#include <random>

#include "engine/bench.h"
#include "io/tokenizer.h"
#include "model/config.h"
#include "model/transformer.h"

namespace kvtrim {
namespace {

using Clock = std::chrono::steady_clock;
double NsSince(Clock::time_point t) { return std::chrono::duration<double, std::nano>(Clock::now() - t).count(); }

double Mean(const std::vector<double>& v) { return MeanSd(v).mean; }
double Sd(const std::vector<double>& v) { return MeanSd(v).sd; }

// One repetition: untimed prefill of the depth, then the timed part.
Expected<double> RunOnce(const Engine& e, const LlamaBenchOptions& o, const LlamaBenchTest& t, std::mt19937_64& rng) {
  auto s = Session::Create(e, o.session);
  if (!s.ok()) return s.error();
  Session& ses = *s.value();
  const int vocab = e.config().vocab;
  if (t.n_depth + t.n_prompt + t.n_gen > ses.ctx())
    return MakeError(t.name() + " needs " + std::to_string(t.n_depth + t.n_prompt + t.n_gen) +
                     " positions; the context is " + std::to_string(ses.ctx()));
  auto random_tokens = [&](int n, bool bos) {
    std::vector<int> v(n);
    for (int& x : v) x = static_cast<int>(3 + rng() % (vocab - 3));
    if (bos && n > 0) v[0] = e.tokenizer().bos();
    return v;
  };
  if (t.n_depth > 0) {
    KVTRIM_RETURN_IF_ERROR(ses.Prefill(random_tokens(t.n_depth, true)));
    KVTRIM_RETURN_IF_ERROR(ses.Compress());
  }
  if (t.n_prompt > 0) {
    const auto toks = random_tokens(t.n_prompt, t.n_depth == 0);
    const auto t0 = Clock::now();
    KVTRIM_RETURN_IF_ERROR(ses.Prefill(toks));
    return NsSince(t0);
  }
  // llama-bench's tg starts from one token (BOS) when the cache is empty.
  const auto toks = random_tokens(t.n_gen, t.n_depth == 0);
  const auto t0 = Clock::now();
  for (int g = 0; g < t.n_gen; ++g) KVTRIM_RETURN_IF_ERROR(ses.Decode(toks[g]));
  return NsSince(t0);
}

}  // namespace

std::string LlamaBenchTest::name() const {
  std::string s = n_prompt > 0 ? "pp" + std::to_string(n_prompt) : "tg" + std::to_string(n_gen);
  if (n_depth > 0) s += " @ d" + std::to_string(n_depth);
  return s;
}
double LlamaBenchTest::avg_ns() const { return Mean(samples_ns); }
double LlamaBenchTest::stddev_ns() const { return Sd(samples_ns); }
std::vector<double> LlamaBenchTest::samples_ts() const {
  std::vector<double> ts;
  for (double ns : samples_ns) ts.push_back(1e9 * (n_prompt + n_gen) / ns);
  return ts;
}
double LlamaBenchTest::avg_ts() const { return Mean(samples_ts()); }
double LlamaBenchTest::stddev_ts() const { return Sd(samples_ts()); }

Expected<std::vector<LlamaBenchTest>> RunLlamaBench(const Engine& e, const LlamaBenchOptions& o) {
  if (o.reps < 1) return MakeError("reps must be >= 1");
  std::vector<LlamaBenchTest> tests;
  for (int d : o.depths) {
    if (d < 0) return MakeError("depth must be >= 0");
    for (int p : o.prompts)
      if (p > 0) tests.push_back({p, 0, d, {}});
    for (int n : o.gens)
      if (n > 0) tests.push_back({0, n, d, {}});
  }
  std::mt19937_64 rng(o.seed);
  for (auto tw = Clock::now(); NsSince(tw) < o.warmup_s * 1e9;) {  // page-in, threads, clocks
    auto s = Session::Create(e, o.session);
    if (!s.ok()) return s.error();
    std::vector<int> toks(std::min(64, s.value()->ctx() - 17), e.tokenizer().bos());
    KVTRIM_RETURN_IF_ERROR(s.value()->Prefill(toks));
    for (int i = 0; i < 16; ++i) KVTRIM_RETURN_IF_ERROR(s.value()->Decode(e.tokenizer().bos()));
  }
  for (auto& t : tests) {
    for (int r = 0; r < o.reps; ++r) {
      auto ns = RunOnce(e, o, t, rng);
      if (!ns.ok()) return ns.error();
      t.samples_ns.push_back(ns.value());
      if (o.progress) o.progress(t.name() + " rep " + std::to_string(r + 1));
    }
  }
  return tests;
}

}  // namespace kvtrim

namespace kvtrim {

Expected<PrefillBreakdown> MeasurePrefillBreakdown(const Engine& e, const SessionOptions& so, int tokens, int reps) {
  if (reps < 1 || tokens < 1) return MakeError("tokens and reps must be >= 1");
  model::ForwardProfile p;
  std::mt19937_64 rng(1);
  const int vocab = e.config().vocab;
  for (int r = 0; r < reps + 1; ++r) {  // the first run warms up, untimed
    auto s = Session::Create(e, so);
    if (!s.ok()) return s.error();
    if (tokens > s.value()->ctx())
      return MakeError(std::to_string(tokens) + " tokens exceed the context length " + std::to_string(s.value()->ctx()));
    std::vector<int> toks(tokens);
    for (int& x : toks) x = static_cast<int>(3 + rng() % (vocab - 3));
    toks[0] = e.tokenizer().bos();
    model::ForwardProfile warm;
    model::ScopedForwardProfile scope(r == 0 ? &warm : &p);
    KVTRIM_RETURN_IF_ERROR(s.value()->Prefill(toks));
  }
  PrefillBreakdown b;
  b.tokens = tokens;
  const double k = 1e-9 / reps;
  b.total_s = p.total_ns.load() * k;
  b.matmul_s = p.matmul_ns.load() * k;
  b.stats_s = p.stats_thread_ns.load() * k / std::max(1, e.threads());
  b.attention_s = std::max(0.0, p.attention_ns.load() * k - b.stats_s);
  b.other_s = std::max(0.0, b.total_s - b.matmul_s - b.attention_s - b.stats_s);
  return b;
}

}  // namespace kvtrim
