// `kvtrim bench`: prefill and decode throughput at context depths.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "checks.h"
#include "model_flags.h"
#include "bench_llama_output.h"
#include "commands.h"
#include "kv_flags.h"
#include "kvtrim/bench.h"
#include "kvtrim/bench_llama.h"
#include "kvtrim/clock.h"
#include "kvtrim/policies.h"
#include "kvtrim/report.h"

namespace kvtrim::cli {

namespace {

struct BenchOpts {
  RopeOverrides rope;
  std::string model, json;
  std::vector<int> depths = {0, 256, 1024};
  int gen = 32, reps = 3, threads = 0, prefill = 128, ctx = 0;
  double membw_mib = 0;
  bool flops = false;
  KvFlags kv;
  std::string output = "text";              // text | md | json (llama-bench's formats)
  std::vector<int> n_prompt = {512}, n_gen = {128};
  bool depth_given = false;
  bool breakdown = false;
};

// `--time-breakdown`: where a prefill of --prefill tokens spends its time.
int RunBreakdown(const Engine& e, const BenchOpts& o) {
  SessionOptions so;
  so.kv = ToKvOptions(o.kv, o.kv.kv.policy);
  auto b = MeasurePrefillBreakdown(e, so, o.prefill, o.reps);
  if (!b.ok()) {
    std::fprintf(stderr, "kvtrim bench: %s\n", b.error().message.c_str());
    return 1;
  }
  const PrefillBreakdown& r = b.value();
  std::printf("prefill of %d tokens, %d threads, kv %s, %s kernels: %.1f ms (%.1f tok/s), mean of %d\n", r.tokens,
              e.threads(), o.kv.kv.policy.c_str(), KernelPathsLabel(e).c_str(), r.total_s * 1e3,
              r.tokens / r.total_s, o.reps);
  const std::pair<const char*, double> parts[] = {{"matrix products", r.matmul_s}, {"attention", r.attention_s},
                                                  {"statistics taps", r.stats_s}, {"other", r.other_s}};
  for (const auto& [name, sec] : parts) std::printf("  %-16s %9.2f ms  %5.1f%%\n", name, sec * 1e3, 100 * sec / r.total_s);
  return 0;
}

// `-o md|json`: llama-bench's pp/tg tests, printed in its format.
int RunLlamaStyle(const Engine& e, const BenchOpts& o) {
  LlamaBenchOptions lo;
  lo.prompts = o.n_prompt;
  lo.gens = o.n_gen;
  lo.depths = o.depth_given ? o.depths : std::vector<int>{0};
  lo.reps = o.reps;
  lo.session.kv = ToKvOptions(o.kv, o.kv.kv.policy);
  auto tests = RunLlamaBench(e, lo);
  if (!tests.ok()) {
    std::fprintf(stderr, "kvtrim bench: %s\n", tests.error().message.c_str());
    return 1;
  }
  const LlamaBenchMeta m = DescribeForBench(e, o.model, o.kv.kv.quant);
  const std::string out = o.output == "md" ? LlamaBenchMarkdown(m, tests.value()) : LlamaBenchJson(m, tests.value());
  std::fputs(out.c_str(), stdout);
  // stdout stays llama-bench's format; the memory of the repacks goes to stderr.
  std::fprintf(stderr, "%s\n", FormatWeights(DescribeWeights(e)).c_str());
  if (!o.json.empty()) {
    std::ofstream f(o.json);
    if (!f) {
      std::fprintf(stderr, "kvtrim bench: cannot write '%s'\n", o.json.c_str());
      return 1;
    }
    f << LlamaBenchJson(m, tests.value());
  }
  return 0;
}

// The policy's counters under a row (summed over reps; decode steps alone in
// parentheses), the fallback rate when there are merges, and the share of a
// decode step spent in decode-time compression.
void PrintCounters(const BenchRow& r, const std::string& policy) {
  if (r.counters.empty()) return;
  std::printf("       counters:");
  for (size_t i = 0; i < r.counters.size(); ++i)
    std::printf(" %s %lld (decode %lld)", r.counters[i].first.c_str(), static_cast<long long>(r.counters[i].second),
                static_cast<long long>(r.decode_counters[i].second));
  for (const auto& [label, pct] : PolicyCounterRates(policy, r.counters)) std::printf("; %s %.2f%%", label.c_str(), pct);
  const double step_us = 1e6 / std::max(1e-9, r.decode_tok_s.mean);
  std::printf("; decode-time compression %.2f us of a %.1f us step (%.2f%%)\n", r.evict_us_per_tok, step_us,
              100.0 * r.evict_us_per_tok / step_us);
}

// --flops: the multiply-add peak, and each row's prefill as a share of it
// (FLOPs of a full-cache causal prefill; a compressed chunked prefill does fewer).
void PrintFlops(const FmaPeak& p, const std::vector<BenchRow>& rows) {
  auto kind = [](double v, const char* unit) {
    return v > 0 ? std::to_string(static_cast<int64_t>(v + 0.5)) + " " + unit : std::string("n/a (not on this CPU)");
  };
  std::printf("multiply-add peak (all threads, registers only): f32 %s, bf16 %s, int8 %s\n", kind(p.f32, "GFLOP/s").c_str(),
              kind(p.bf16, "GFLOP/s").c_str(), kind(p.int8, "GOP/s").c_str());
  for (const auto& r : rows) {
    const double g = r.prefill_flops_per_tok * r.prefill_tok_s.mean / 1e9;
    // Both shares: f32 weights multiply in f32, Q8_0/Q4_0 ones in int8 (VNNI).
    std::printf("%6d prefill %.1f GFLOP/s (%.3g FLOP a token): %.1f%% of the f32 peak", r.depth, g,
                r.prefill_flops_per_tok, p.f32 > 0 ? 100.0 * g / p.f32 : 0.0);
    if (p.int8 > 0) std::printf(", %.1f%% of the int8 peak", 100.0 * g / p.int8);
    std::printf("\n");
  }
}

// Prints the table (and writes --json); false if the JSON cannot be written.
bool PrintBench(const Engine& e, const BenchOpts& o, double membw, const FmaPeak& fma, const std::vector<BenchRow>& rows) {
  std::printf("model %s, %d threads, kv %s, gen %d, reps %d\n", o.model.c_str(), e.threads(), (o.kv.kv.policy + (o.kv.kv.quality > 0 ? " quality " + std::to_string(o.kv.kv.quality) : " ratio " + std::to_string(o.kv.kv.ratio)) + " quant " + o.kv.kv.quant).c_str(),
              o.gen, o.reps);
  const int64_t step = SteadyClock().step_ns;
  std::printf("clock step %s: each figure is timed over runs spanning >= %d steps (\"<res\": fewer)\n",
              FormatStep(step).c_str(), kMinClockSteps);
  if (membw > 0)
    std::printf("read bandwidth: %.2f GB/s (%.0f MiB buffer) before the rows; each row's share is of the probes "
                "just before and after its timed decode steps (bw GB/s: their mean and sd)\n", membw, o.membw_mib);
  std::printf("%6s %8s %22s %20s %12s %12s %8s %9s %10s%s\n", "depth", "prefill", "prefill tok/s", "decode tok/s",
              "weights B/t", "kv B/t", "ent/head", "evict us", "GB/s", membw > 0 ? "        bw GB/s  % of bw" : "");
  nlohmann::json j = nlohmann::json::array();
  for (const auto& r : rows) {
    std::printf("%6d %8d %12.1f ± %7.1f %10.1f ± %7.1f %12.0f %12.0f %8.1f %9.2f %10.2f", r.depth, r.prefill_len,
                r.prefill_tok_s.mean, r.prefill_tok_s.sd, r.decode_tok_s.mean, r.decode_tok_s.sd,
                r.weight_bytes_per_tok, r.kv_bytes_per_tok, r.entries_per_head, r.evict_us_per_tok, r.gb_s);
    if (membw > 0) std::printf("  %7.1f ± %5.1f  %6.1f%%", r.mem_read_gb_s.mean, r.mem_read_gb_s.sd, 100.0 * r.bw_share);
    if (r.below_resolution) std::printf("  <res");
    if (r.inner_reps > 1) std::printf("  (%d runs a sample)", r.inner_reps);
    std::printf("\n");
    PrintCounters(r, o.kv.kv.policy);
    nlohmann::json counters = nlohmann::json::object(), decode_counters = nlohmann::json::object();
    for (const auto& [name, v] : r.counters) counters[name] = v;
    for (const auto& [name, v] : r.decode_counters) decode_counters[name] = v;
    if (o.kv.kv.quality > 0) std::printf("%6s kv-quality %g: chosen ratio %.4f (mean over reps)\n", "", o.kv.kv.quality, r.kv_ratio);
    j.push_back({{"depth", r.depth}, {"prefill_len", r.prefill_len},
                 {"prefill_tok_s", r.prefill_tok_s.mean}, {"prefill_tok_s_sd", r.prefill_tok_s.sd},
                 {"decode_tok_s", r.decode_tok_s.mean}, {"decode_tok_s_sd", r.decode_tok_s.sd},
                 {"kv_bytes", r.kv_bytes}, {"kv_bytes_peak", r.kv_bytes_peak}, {"kv_bytes_full", r.kv_bytes_full},
                 {"weight_bytes_per_token", r.weight_bytes_per_tok}, {"kv_bytes_per_token", r.kv_bytes_per_tok},
                 {"gb_s", r.gb_s}, {"threads", e.threads()}, {"kv_policy", o.kv.kv.policy}, {"kv_ratio", r.kv_ratio}, {"kv_quality", o.kv.kv.quality}, {"kv_quant", o.kv.kv.quant}, {"model", o.model},
                 {"mem_read_gb_s", membw}, {"row_mem_read_gb_s", r.mem_read_gb_s.mean},
                 {"row_mem_read_gb_s_sd", r.mem_read_gb_s.sd}, {"bw_share", r.bw_share}, {"compress_ms", r.compress_ms},
                 {"prefill_flops_per_token", r.prefill_flops_per_tok}, {"fma_peak_f32_gflop_s", fma.f32},
                 {"fma_peak_bf16_gflop_s", fma.bf16}, {"fma_peak_int8_gop_s", fma.int8},
                 {"prefill_chunk", o.kv.kv.prefill_chunk}, {"prefill_compress_ms", r.prefill_compress_ms},
                 {"first_decode_ms", r.first_decode_ms},
                 {"evict_us_per_token", r.evict_us_per_tok}, {"entries_per_head", r.entries_per_head},
                 {"peak_rss_bytes", PeakRssBytes()}, {"counters", counters}, {"decode_counters", decode_counters},
                 {"clock_step_ns", step}, {"inner_reps", r.inner_reps},
                 {"below_clock_resolution", r.below_resolution},
                 {"compress_below_clock_resolution", !r.compress_resolved}});
  }
  if (o.flops) PrintFlops(fma, rows);
  size_t kv_peak = 0;
  for (const auto& r : rows) kv_peak = std::max(kv_peak, r.kv_bytes_peak);
  std::printf("peak RSS: %.1f MiB; peak KV: %.1f MiB (the largest row's)\n", PeakRssBytes() / 1048576.0,
              kv_peak / 1048576.0);
  const WeightsReport w = DescribeWeights(e);
  std::printf("%s\n", FormatWeights(w).c_str());
  for (auto& row : j) {
    row["weight_bytes"] = w.file_bytes;
    row["repacked_weight_bytes"] = w.packed_bytes;
    row["released_weight_bytes"] = w.released_bytes;
  }
  if (!o.json.empty()) {
    std::ofstream f(o.json);
    if (!f) {
      std::fprintf(stderr, "kvtrim bench: cannot write '%s'\n", o.json.c_str());
      return false;
    }
    f << j.dump(2) << "\n";
  }
  return true;
}

}  // namespace

Command AddBench(CLI::App& app) {
  auto o = std::make_shared<BenchOpts>();
  o->model = DefaultModelPath();
  CLI::App* sub = app.add_subcommand("bench", "Prefill and decode tokens/s at context depths, bytes read, GB/s");
  sub->add_option("-m,--model", o->model, "GGUF model file")->capture_default_str();
  sub->add_option("-d,--depth", o->depths, "Context depths (tokens already in the cache); depths beyond "
                  "the context are clipped")->capture_default_str()->delimiter(',');
  sub->add_option("--gen", o->gen, "Decode steps timed at each depth")->capture_default_str()->check(Positive());
  sub->add_option("--reps", o->reps, "Repetitions (mean and sd)")->capture_default_str()->check(Positive());
  sub->add_option("--prefill", o->prefill, "Prompt tokens timed at depth 0")->capture_default_str()->check(Positive());
  sub->add_option("-t,--threads", o->threads, "Threads (0: all cores)")->capture_default_str()->check(NonNegative());
  AddCtxFlag(sub, &o->ctx, "Context length of the sessions (0: the model's; longer depths need it)");
  AddRopeFlags(sub, &o->rope);
  UseServingDefaults(&o->kv);
  AddKvFlags(sub, &o->kv, true, true);
  AddCacheTypeFlags(sub, &o->kv);
  sub->add_option("--membw", o->membw_mib, "Also measure read bandwidth over a buffer of this many MiB (0: off): before the rows "
                  "and beside each row's timed decode steps, whose share of it the rows print")
      ->capture_default_str()->check(NonNegative());
  sub->add_flag("--flops", o->flops, "Also measure the multiply-add peak (f32, bf16, int8) of the threads and print "
                "each prefill's share of it");
  sub->add_option("--json", o->json, "Write the rows as JSON to this file");
  sub->add_option("-o,--output", o->output, "text, or llama-bench's md / json (pp/tg tests of -p/-n at the -d depths)")
      ->capture_default_str()->check(CLI::IsMember({"text", "md", "json"}));
  sub->add_flag("--time-breakdown", o->breakdown, "Print where a prefill of --prefill tokens spends its time "
                "(matrix products, attention, statistics taps, other; mean of --reps)");
  sub->add_option("-p,--n-prompt", o->n_prompt, "With -o md|json: prompt lengths (pp tests)")
      ->capture_default_str()->delimiter(',');
  sub->add_option("-n,--n-gen", o->n_gen, "With -o md|json: decode lengths (tg tests)")->capture_default_str()->delimiter(',');
  auto action = [o, sub]() -> int {
    o->depth_given = sub->get_option("--depth")->count() > 0;
    if (Status st = ApplyCacheTypes(&o->kv); !st.ok()) {
      std::fprintf(stderr, "kvtrim bench: %s\n", st.message().c_str());
      return 1;
    }
    for (const std::string& w : KvFlagWarnings(o->kv)) std::fprintf(stderr, "kvtrim bench: warning: %s\n", w.c_str());
    std::unique_ptr<Engine> engine = LoadEngine("bench", o->model, o->threads, o->rope, o->ctx);
    if (!engine) return 1;
    const Engine& e = *engine;
    if (o->breakdown) return RunBreakdown(e, *o);
    if (o->output != "text") return RunLlamaStyle(e, *o);
    BenchOptions bo;
    bo.gen = o->gen;
    bo.reps = o->reps;
    bo.prefill_tokens = o->prefill;
    bo.session.kv = ToKvOptions(o->kv, o->kv.kv.policy);
    bo.session.ctx = o->ctx;
    bo.membw_bytes = static_cast<size_t>(o->membw_mib * 1048576.0);
    const int ctx = o->ctx > 0 ? o->ctx : e.context_length();
    bo.depths.clear();
    for (int d : o->depths) {
      int clipped = std::min(d, ctx - o->gen - 1);  // + the untimed first step (BenchRow::first_decode_ms)
      if (clipped != d) std::fprintf(stderr, "kvtrim bench: depth %d clipped to %d (context %d, gen %d)\n", d, clipped, ctx, o->gen);
      bo.depths.push_back(std::max(0, clipped));
    }
    const bool tty = isatty(fileno(stderr));
    if (tty) bo.progress = [](const std::string& s) { std::fprintf(stderr, "\r%-40s", s.c_str()); };
    double membw = 0;
    if (o->membw_mib > 0) membw = MeasureReadBandwidth(e, static_cast<size_t>(o->membw_mib * 1048576.0), 5);
    const FmaPeak fma = o->flops ? MeasureFmaPeak(e, 3) : FmaPeak{};
    auto rows = RunBench(e, bo);
    if (tty) std::fprintf(stderr, "\r%-40s\r", "");
    if (!rows.ok()) {
      std::fprintf(stderr, "kvtrim bench: %s\n", rows.error().message.c_str());
      return 1;
    }
    return PrintBench(e, *o, membw, fma, rows.value()) ? 0 : 1;
  };
  return {sub, action};
}

}  // namespace kvtrim::cli
