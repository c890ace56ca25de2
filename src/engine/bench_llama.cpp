#include "kvtrim/bench_llama.h"

#include "engine/engine_impl.h"

#include <chrono>
#include <cmath>
#include <random>

#include "kvtrim/bench.h"
#include "kvtrim/bench_repeat.h"
#include "kv/cache.h"
#include "io/tokenizer.h"
#include "model/config.h"
#include "model/transformer.h"

namespace kvtrim {
namespace {

using Chrono = std::chrono::steady_clock;
double NsSince(Chrono::time_point t) { return std::chrono::duration<double, std::nano>(Chrono::now() - t).count(); }

double Mean(const std::vector<double>& v) { return MeanSd(v).mean; }
double Sd(const std::vector<double>& v) { return MeanSd(v).sd; }

// A batch of k repetitions of one test: k sessions prepared untimed (the
// depth prefilled and compressed), then the timed part of each in one span.
Expected<BatchTiming> RunBatch(const Engine& e, const LlamaBenchOptions& o, const LlamaBenchTest& t,
                               std::mt19937_64& rng, const Clock& clock, int k) {
  const int vocab = e.impl().config().vocab;
  auto random_tokens = [&](int n, bool bos) {
    std::vector<int> v(n);
    for (int& x : v) x = static_cast<int>(3 + rng() % (vocab - 3));
    if (bos && n > 0) v[0] = e.impl().tokenizer().bos();
    return v;
  };
  std::vector<std::unique_ptr<Session>> ses;
  std::vector<std::vector<int>> toks;
  for (int i = 0; i < k; ++i) {
    auto s = Session::Create(e, o.session);
    if (!s.ok()) return s.error();
    if (t.n_depth + t.n_prompt + t.n_gen > s.value()->ctx())
      return MakeError(t.name() + " needs " + std::to_string(t.n_depth + t.n_prompt + t.n_gen) +
                       " positions; the context is " + std::to_string(s.value()->ctx()));
    if (t.n_depth > 0) {
      KVTRIM_RETURN_IF_ERROR(s.value()->Prefill(random_tokens(t.n_depth, true)));
      KVTRIM_RETURN_IF_ERROR(s.value()->Compress());
    }
    // llama-bench's tg starts from one token (BOS) when the cache is empty.
    toks.push_back(t.n_prompt > 0 ? random_tokens(t.n_prompt, t.n_depth == 0) : random_tokens(t.n_gen, t.n_depth == 0));
    ses.push_back(std::move(s.value()));
  }
  Stopwatch sw(clock);
  for (int i = 0; i < k; ++i) {
    if (t.n_prompt > 0) {
      KVTRIM_RETURN_IF_ERROR(ses[i]->Prefill(toks[i]));
    } else {
      for (int g = 0; g < t.n_gen; ++g) KVTRIM_RETURN_IF_ERROR(ses[i]->Decode(toks[i][g]));
    }
  }
  BatchTiming b;
  b.spans_ns = {sw.Elapsed().ns};
  b.bytes_per_rep = ses[0]->impl().cache().BytesHeld();
  return b;
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
  std::vector<double> ts;  // a sample of 0 ns (below the clock's resolution) gives 0, never inf
  for (double ns : samples_ns) ts.push_back(RatePerSecond(n_prompt + n_gen, ns).value_or(0));
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
      if (p > 0) tests.push_back({p, 0, d, {}, {}, false});
    for (int n : o.gens)
      if (n > 0) tests.push_back({0, n, d, {}, {}, false});
  }
  std::mt19937_64 rng(o.seed);
  for (auto tw = Chrono::now(); NsSince(tw) < o.warmup_s * 1e9;) {  // page-in, threads, clocks
    auto s = Session::Create(e, o.session);
    if (!s.ok()) return s.error();
    std::vector<int> toks(std::min(64, s.value()->ctx() - 17), e.impl().tokenizer().bos());
    KVTRIM_RETURN_IF_ERROR(s.value()->Prefill(toks));
    for (int i = 0; i < 16; ++i) KVTRIM_RETURN_IF_ERROR(s.value()->Decode(e.impl().tokenizer().bos()));
  }
  const Clock& clock = o.clock ? *o.clock : SteadyClock();
  for (auto& t : tests) {
    RepeatUntilResolved rep(clock, o.limits);
    for (int r = 0; r < o.reps; ++r) {
      auto m = rep.Measure([&](int k) { return RunBatch(e, o, t, rng, clock, k); });
      if (!m.ok()) return m.error();
      t.samples_ns.push_back(m.value().ns_per_rep[0]);
      t.samples_reps.push_back(m.value().reps);
      t.below_resolution = t.below_resolution || !m.value().resolved;
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
  const int vocab = e.impl().config().vocab;
  for (int r = 0; r < reps + 1; ++r) {  // the first run warms up, untimed
    auto s = Session::Create(e, so);
    if (!s.ok()) return s.error();
    if (tokens > s.value()->ctx())
      return MakeError(std::to_string(tokens) + " tokens exceed the context length " + std::to_string(s.value()->ctx()));
    std::vector<int> toks(tokens);
    for (int& x : toks) x = static_cast<int>(3 + rng() % (vocab - 3));
    toks[0] = e.impl().tokenizer().bos();
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
