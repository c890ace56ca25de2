// `kvtrim run`: generate text from a prompt.
#include <cstdio>
#include <fstream>
#include <sstream>

#include "checks.h"
#include "commands.h"
#include "kv_flags.h"
#include "kvtrim/clock.h"
#include "kvtrim/engine.h"
#include "kvtrim/prompt.h"
#include "kvtrim/report.h"
#include "model_flags.h"
#include "sampling_flags.h"

namespace kvtrim::cli {
namespace {

// The prompt's text: -p as it is, or the file -f.
Expected<std::string> PromptText(const std::string& text, const std::string& file) {
  if (file.empty()) return text;
  std::ifstream in(file, std::ios::binary);
  if (!in) return MakeError("cannot open prompt file '" + file + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct RunOpts {
  RopeOverrides rope;
  std::string model, prompt, prompt_file, system;
  bool chat = false;
  int n = 256, threads = 0, ctx = 0;
  SamplingOptions sampling;
  std::string save_context, load_context;
  KvFlags kv;
};

// What a run measured, on stderr: rates, the cache's bytes and entries, head
// budgets, the policy's counters, memory.
void PrintRunStats(const Engine& e, const Session& s, const KvOptions& kv, const GenerateStats& st,
                   size_t prompt_tokens) {
  const KvReport r = DescribeKv(s);
  if (kv.quality > 0)
    std::fprintf(stderr, "kv-quality %g: NLL(c) %.4f over %zu prompt tokens, chosen ratio %.4f (%s)\n", kv.quality,
                 s.context_nll(), prompt_tokens, r.ratio, kv.calibration.c_str());
  std::fprintf(stderr, "prefill: %d tokens in %.3f s (%s)\n", st.prompt_tokens, st.prefill_s,
               FormatRate(st.prompt_tokens, st.prefill_s).c_str());
  // The sampler's share of the decode, where the decode spans enough clock steps to be read.
  char share[48] = "";
  if (st.decode_steps > 0 && !BelowResolutionMs(1e3 * st.decode_s))
    std::snprintf(share, sizeof share, " (%.1f%%)", 100.0 * st.sample_s / st.decode_s);
  std::fprintf(stderr, "decode: %d tokens in %.3f s (%s), sampling %.1f ms%s\n", st.decode_steps, st.decode_s,
               FormatRate(st.decode_steps, st.decode_s).c_str(), 1e3 * st.sample_s, share);
  // Like with like: the bytes the entries occupy against an exact full f32
  // cache (so --kv full reads 100%); the allocation, slack included, after.
  // The share of a full cache of the entries' own type (what the policy
  // saved), then of a full f32 one (what the type saved too).
  char budget[48];  // what sized the heads: the ratio, or the threshold (the total follows the context)
  std::snprintf(budget, sizeof budget, kv.threshold > 0 ? "threshold %g" : "ratio %g", kv.threshold > 0 ? kv.threshold : r.ratio);
  std::fprintf(stderr, "kv: %s %s quant %s: %zu bytes in %zu entries, %.1f%% of a full %s cache (%zu bytes), "
               "%.1f%% of a full f32 cache (%zu bytes), %zu bytes allocated (peak %zu), %lld tokens, %lld evicted, "
               "compression %.3f s\n",
               kv.policy.c_str(), budget, kv.quant.c_str(), r.bytes_used, r.entries,
               100.0 * r.bytes_used / std::max<size_t>(1, r.bytes_full_same_type), kv.quant.c_str(),
               r.bytes_full_same_type, 100.0 * r.bytes_used / std::max<size_t>(1, r.bytes_full), r.bytes_full,
               r.bytes_held, r.peak_bytes, static_cast<long long>(r.logical_length),
               static_cast<long long>(r.evictions), r.compress_seconds);
  if (r.per_head_budgets) {
    std::fprintf(stderr, "head budgets: from profile %s, entries per KV head:", kv.profile.c_str());
    for (const std::vector<int>& layer : r.head_entries)
      for (size_t h = 0; h < layer.size(); ++h) std::fprintf(stderr, "%s%d", h ? "," : " |", layer[h]);
    std::fprintf(stderr, "\n");
  }
  if (!r.counters.empty()) {
    std::fprintf(stderr, "kv counters:");
    for (const auto& [name, v] : r.counters) std::fprintf(stderr, " %s %lld", name.c_str(), static_cast<long long>(v));
    for (const auto& [label, pct] : r.counter_rates) std::fprintf(stderr, " (%s %.2f%%)", label.c_str(), pct);
    std::fprintf(stderr, "\n");
  }
  std::fprintf(stderr, "peak RSS: %.1f MiB\n", PeakRssBytes() / 1048576.0);
  std::fprintf(stderr, "%s\n", FormatWeights(DescribeWeights(e)).c_str());
}

// The run's KV options, with the warnings the flags call for: a budget the
// full cache ignores; KV flags beside --load-context (the file's options win).
Expected<KvOptions> RunKvOptions(RunOpts& o) {
  KVTRIM_RETURN_IF_ERROR(ApplyCacheTypes(&o.kv));
  if (!o.load_context.empty()) {
    if (o.kv.any_given())
      std::fprintf(stderr, "kvtrim run: warning: the KV flags given are ignored: --load-context brings the KV "
                   "options the context was saved with\n");
  } else {
    for (const std::string& w : KvFlagWarnings(o.kv)) std::fprintf(stderr, "kvtrim run: warning: %s\n", w.c_str());
  }
  return ToKvOptions(o.kv, o.kv.kv.policy);
}

// A policy asked to compress that removed nothing: the prompt is within what
// it protects (sinks, observation window, recent tokens) or its budget.
void WarnIfNothingEvicted(const KvReport& r, const KvOptions& kv) {
  const bool asked = kv.policy != "full" && (kv.ratio < 1 || kv.budget_tokens > 0 || kv.threshold > 0 || kv.quality > 0);
  if (asked && r.bytes_used >= r.bytes_full_same_type && r.evictions == 0)
    std::fprintf(stderr, "kvtrim run: warning: %s kept all %lld tokens of every head, nothing was evicted: the "
                 "sequence is within what the policy always keeps (its sinks, observation window or recent tokens; "
                 "`kvtrim policies`) or within its budget\n", kv.policy.c_str(),
                 static_cast<long long>(r.logical_length));
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "kvtrim run: %s\n", message.c_str());
  return 1;
}

int RunAction(RunOpts& o) {
  auto kv = RunKvOptions(o);
  if (!kv.ok()) return Fail(kv.error().message);
  std::unique_ptr<Engine> engine = LoadEngine("run", o.model, o.threads, o.rope, o.ctx);
  if (!engine) return 1;
  const Engine& e = *engine;
  SessionOptions so;
  so.ctx = o.ctx;
  so.kv = kv.value();
  // A loaded context brings its own KV options; the prompt is a question after it.
  const bool loaded = !o.load_context.empty();
  auto session = loaded ? Session::LoadContext(e, o.load_context, so) : Session::Create(e, so);
  if (!session.ok()) return Fail(session.error().message);
  if (loaded) so.kv = session.value()->kv_options();
  auto text = PromptText(o.prompt, o.prompt_file);
  if (!text.ok()) return Fail(text.error().message);
  const PromptTokens pt = EncodePrompt(e, {text.value(), o.chat, o.system, loaded});
  if (!pt.warning.empty()) std::fprintf(stderr, "kvtrim run: warning: %s\n", pt.warning.c_str());
  const std::vector<int>& prompt = pt.ids;
  // The last generated token is printed, never fed back: P + N - 1 positions.
  const size_t held = static_cast<size_t>(session.value()->position()) + prompt.size();
  if (held + static_cast<size_t>(std::max(0, o.n - 1)) > static_cast<size_t>(session.value()->ctx()))
    return Fail("prompt (" + std::to_string(held) + " tokens) + " + std::to_string(o.n) +
                " generated tokens exceeds the context length " + std::to_string(session.value()->ctx()) +
                " (-c N sets it; past the model's trained context add RoPE scaling: --rope-scaling yarn ...)");
  int prev = pt.prev;
  for (int id : prompt) {
    std::fputs(TokenText(e, prev, id).c_str(), stdout);
    prev = id;
  }
  std::fflush(stdout);
  SamplingOptions sp = o.sampling;
  sp.stop_ids = pt.stop_ids;
  auto st = Generate(*session.value(), prompt, o.n, sp, [&](int id) {
    std::fputs(TokenText(e, prev, id).c_str(), stdout);
    std::fflush(stdout);
    prev = id;
  }, PromptStep{!loaded, o.save_context, {}});
  std::fputs("\n", stdout);
  std::fflush(stdout);
  if (!st.ok()) return Fail(st.error().message);
  PrintRunStats(e, *session.value(), so.kv, st.value(), prompt.size());
  WarnIfNothingEvicted(DescribeKv(*session.value()), so.kv);
  return 0;
}

}  // namespace

Command AddRun(CLI::App& app) {
  auto o = std::make_shared<RunOpts>();
  o->model = DefaultModelPath();
  CLI::App* sub = app.add_subcommand("run", "Generate text from a prompt; timing and KV bytes go to stderr");
  sub->add_option("-m,--model", o->model, "GGUF model file")->capture_default_str();
  CLI::Option* p_opt = sub->add_option("-p,--prompt", o->prompt, "Prompt text (empty: generation starts from BOS alone)");
  sub->add_option("-f,--file", o->prompt_file, "Read the prompt (with --chat: the user message) from this file")
      ->excludes(p_opt);
  CLI::Option* chat = sub->add_flag("--chat", o->chat, "Format the prompt as a user message with the model's chat "
                                    "template (tokenizer.chat_template) and stop at the end of the turn");
  sub->add_option("--system", o->system, "With --chat: a system message")->needs(chat);
  sub->add_option("-n,--n-predict", o->n, "Tokens to generate after the prompt (as llama.cpp's -n; the prompt and N - 1 fed-back tokens must fit the context)")->capture_default_str()->check(NonNegative());
  AddSamplingFlags(sub, &o->sampling);
  sub->add_flag("--ignore-eos", o->sampling.ignore_eos, "Keep generating past EOS (fixed-length runs)");
  sub->add_option("-t,--threads", o->threads, "Threads (0: all cores)")->capture_default_str()->check(NonNegative());
  AddRopeFlags(sub, &o->rope);
  AddCtxFlag(sub, &o->ctx, "Context length (0: the model's; past its trained context with RoPE scaling, e.g. "
             "--rope-scaling yarn --rope-scale 4)");
  sub->add_option("--save-context", o->save_context,
                  "After the prompt's prefill and compression, save the context to this file (docs/context-file.md)");
  sub->add_option("--load-context", o->load_context,
                  "Start from a context saved with --save-context (its KV options win); the prompt is a question "
                  "appended to it, not compressed")
      ->check(CLI::ExistingFile);
  UseServingDefaults(&o->kv);
  AddKvFlags(sub, &o->kv, true, true);
  AddCacheTypeFlags(sub, &o->kv);
  return {sub, [o]() { return RunAction(*o); }};
}

}  // namespace kvtrim::cli
