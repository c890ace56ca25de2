// `kvtrim eval`: every method side by side on the same model and samples:
// needle-task accuracy, KL and NLL ratios, KV bytes; table, JSON, CSV, plots.

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "checks.h"
#include "model_flags.h"
#include "kvtrim/clock.h"
#include "commands.h"
#include "kvtrim/eval_sweep.h"
#include "kvtrim/policies.h"
#include "eval_output.h"
#include "kv_flags.h"
#include "progress.h"

namespace kvtrim::cli {
namespace {

std::string Timestamp() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", std::localtime(&t));
  return buf;
}

struct EvalOpts {
  RopeOverrides rope;
  std::string model, haystack, out, json, csv, shard, max_context = "truncate";
  std::vector<std::string> methods, tasks, fidelity_tasks = {"fidelity", "fidelity-decode"}, task_files;
  std::vector<double> ratios = {0.5, 0.25, 0.1};
  int samples = 16, threads = 0, context = 0, continuation = 256, needles = 4, queries = 2, turns = 20;
  int conversation_ctx = 0;
  uint64_t seed = 1;
  bool query_aware = false, stream_context = false, no_fidelity = false, no_plots = false;
  KvFlags kv;
};

// "none" or an empty list (`--tasks none`, `--tasks ''`) selects nothing.
bool NoneSelected(const std::vector<std::string>& v) {
  for (const auto& x : v)
    if (!x.empty() && x != "none") return false;
  return true;
}

Status ParseShard(const std::string& s, int* index, int* count) {
  if (s.empty()) return {};
  const size_t slash = s.find('/');
  try {
    size_t a = 0, b = 0;
    if (slash == std::string::npos) throw std::invalid_argument("no slash");
    *index = std::stoi(s.substr(0, slash), &a);
    *count = std::stoi(s.substr(slash + 1), &b);
    if (a != slash || b != s.size() - slash - 1) throw std::invalid_argument("trailing");
  } catch (const std::exception&) {
    return MakeError("--shard '" + s + "' is not of the form i/n (e.g. 0/4)");
  }
  if (*count < 1 || *index < 0 || *index >= *count)
    return MakeError("--shard '" + s + "': need 0 <= i < n");
  return {};
}

// The sweep the flags ask for.
Expected<eval::SweepOptions> ToSweepOptions(const EvalOpts& o) {
  eval::SweepOptions so;
  so.methods = o.methods;
  so.ratios = o.ratios;
  if (!NoneSelected(o.tasks))
    for (const auto& t : o.tasks) {
      if (t.empty() || t == "none") continue;
      auto k = eval::ParseTask(t);
      if (!k.ok()) return k.error();
      so.tasks.push_back(k.value());
    }
  so.fidelity = so.fidelity_decode = false;
  if (!o.no_fidelity && !NoneSelected(o.fidelity_tasks))
    for (const auto& t : o.fidelity_tasks) {
      if (t == "fidelity") so.fidelity = true;
      else if (t == "fidelity-decode") so.fidelity_decode = true;
      else if (!t.empty() && t != "none")
        return MakeError("unknown fidelity task '" + t + "' (fidelity, fidelity-decode, none)");
    }
  so.task_files = o.task_files;
  if (o.max_context != "truncate" && o.max_context != "skip")
    return MakeError("--max-context must be 'truncate' or 'skip', not '" + o.max_context + "'");
  so.truncate_long = o.max_context == "truncate";
  so.samples = o.samples;
  so.seed = o.seed;
  so.context_tokens = o.context;
  so.query_aware = o.query_aware;
  so.stream_context = o.stream_context;
  so.haystack = o.haystack;
  so.kv = ToKvOptions(o.kv, "full");
  so.quality = so.kv.quality;
  so.calibration = so.kv.calibration;
  so.fidelity_continuation = o.continuation;
  so.task.needles = o.needles;
  so.task.queries = o.queries;
  so.task.turns = o.turns;
  so.task.conversation_ctx = o.conversation_ctx;
  KVTRIM_RETURN_IF_ERROR(ParseShard(o.shard, &so.shard_index, &so.shard_count));
  return so;
}

int EvalAction(const EvalOpts& o) {
  auto engine = Engine::Load({o.model, o.threads, o.rope});
  // --context past the model's context: the sessions get that much room
  // (read it with RoPE scaling, e.g. --rope-scaling yarn --rope-scale 8).
  if (engine.ok() && o.context + eval::kAnswerRoom > engine.value()->context_length() && o.context > 0) {
    if (!o.rope.any())
      std::fprintf(stderr, "kvtrim eval: warning: --context %d is past the model's context %d and no RoPE scaling "
                   "is given (--rope-scaling yarn --rope-scale F)\n", o.context, engine.value()->context_length());
    engine = Engine::Load({o.model, o.threads, o.rope, o.context + eval::kAnswerRoom});
  }
  if (!engine.ok()) {
    std::fprintf(stderr, "kvtrim eval: %s\n", engine.error().message.c_str());
    return 1;
  }
  auto so_or = ToSweepOptions(o);
  if (!so_or.ok()) {
    std::fprintf(stderr, "kvtrim eval: %s\n", so_or.error().message.c_str());
    return 1;
  }
  eval::SweepOptions so = std::move(so_or.value());
  so.progress = CountProgress("kvtrim eval", "samples");
  std::fprintf(stderr, "kvtrim eval: %zu methods x %zu ratios, %zu needle tasks, %zu task files%s%s, %d samples "
               "each, %s%s; clock step %s\n", so.methods.size(), so.ratios.size(), so.tasks.size(), so.task_files.size(),
               so.fidelity ? " + fidelity" : "", so.fidelity_decode ? " + fidelity-decode" : "", so.samples,
               so.query_aware ? "query-aware" : "query-agnostic", o.shard.empty() ? "" : (", shard " + o.shard).c_str(),
               FormatStep(SteadyClock().step_ns).c_str());
  auto rep = eval::RunSweep(*engine.value(), so);
  if (!rep.ok()) {
    std::fprintf(stderr, "kvtrim eval: %s\n", rep.error().message.c_str());
    return 1;
  }
  eval::Report& r = rep.value();
  r.meta.model = o.model;
  r.meta.command = QuotedCommandLine();
  const std::string out = o.out.empty() ? "kvtrim-eval-" + Timestamp() : o.out;
  auto files = WriteReportFolder(r, {out, o.json, o.csv, !o.no_plots});
  if (!files.ok()) {
    std::fprintf(stderr, "kvtrim eval: %s\n", files.error().message.c_str());
    return 1;
  }
  std::fprintf(stderr, "kvtrim eval: %.1f s; wrote", r.meta.elapsed_s);
  for (const auto& f : files.value()) std::fprintf(stderr, " %s", f.c_str());
  std::fprintf(stderr, "\n");
  return 0;
}

}  // namespace

Command AddEval(CLI::App& app) {
  auto o = std::make_shared<EvalOpts>();
  o->model = DefaultModelPath();
  o->haystack = DefaultHaystackPath();
  // Every policy but the costly ones (`am`: 6-15 prefills per context, more
  // than the rest of the default sweep together); name them to run them.
  for (const PolicyDescription& p : DescribePolicies())
    if (!p.costly) o->methods.push_back(p.name);
  // niah-multivalue and niah-multiquery ask for several numbers in one answer,
  // which the default model cannot do (MODELS.md: 0 even with the full
  // cache): they are left out of the default sweep (name them to run them).
  o->tasks = {"niah", "niah-multikey", "passkey"};
  CLI::App* sub = app.add_subcommand("eval", "Judge KV policies side by side: needle accuracy, KL, NLL ratio, memory");
  sub->add_option("-m,--model", o->model, "GGUF model file")->capture_default_str();
  sub->add_option("--methods", o->methods,
                  "Policies to compare (full is always the reference); POLICY+adaptive: under adaptive head "
                  "budgets; POLICY+threshold: threshold eviction at the T that holds each ratio's bytes")
      ->delimiter(',')->capture_default_str();
  sub->add_option("--ratios", o->ratios, "Retention ratios")->delimiter(',')->capture_default_str();
  sub->add_option("--tasks", o->tasks, "Needle tasks: niah, niah-multikey, niah-multivalue, niah-multiquery, passkey "
                  "(none or an empty list: only the fidelity tasks)")->delimiter(',')->capture_default_str();
  sub->add_option("--fidelity-tasks", o->fidelity_tasks, "KL/NLL on plain text: fidelity (compress the prefix, append "
                  "the continuation), fidelity-decode (the budget holds while it is decoded), or none")
      ->delimiter(',')->capture_default_str();
  sub->add_flag("--no-fidelity", o->no_fidelity, "Skip both fidelity tasks (same as --fidelity-tasks none)");
  sub->add_option("--task-file", o->task_files, "External task file (JSONL): RULER (input, outputs; string match) or "
                  "LongBench (context, input, answers; token F1); repeatable; first --samples samples of each");
  sub->add_option("--max-context", o->max_context, "Task-file samples longer than --context: truncate (in the middle) "
                  "or skip")->capture_default_str();
  sub->add_option("--shard", o->shard, "Run only shard i of n (i/n, 0 <= i < n): every n-th (task, sample) unit; "
                  "combine the partial reports with `kvtrim eval-merge`");
  sub->add_option("--samples", o->samples, "Samples per task")->capture_default_str()->check(Positive());
  sub->add_option("--seed", o->seed, "Seed of the task generators")->capture_default_str();
  sub->add_option("--context", o->context, "Context length in tokens, question included (0: model context - 48)")
      ->capture_default_str()->check(NonNegative());
  sub->add_option("--continuation", o->continuation, "Fidelity: teacher-forced tokens after the compressed part")
      ->capture_default_str()->check(Positive());
  sub->add_option("--needles", o->needles, "Needles in multikey/multivalue/multiquery samples")->capture_default_str()
      ->check(CLI::Range(2, 16));
  sub->add_option("--queries", o->queries, "Keys asked in multiquery samples")->capture_default_str()->check(CLI::Range(1, 16));
  sub->add_option("--turns", o->turns,
                  "niah-multiturn: the question is asked at this turn, the conversation (--context tokens in all) "
                  "compressed after every turn")
      ->capture_default_str()
      ->check(CLI::Range(2, 1000));
  sub->add_option("--conversation-ctx", o->conversation_ctx,
                  "niah-multiturn: the context length the conversation's sessions are read at (0: the model's); a "
                  "conversation longer than it is re-based as the server's are (docs/server.md, Conversations)")
      ->capture_default_str()
      ->check(NonNegative());
  sub->add_flag("--stream-context", o->stream_context, "Decode the needle/task-file contexts token by token under "
                "the budget (decode-time policies; prefill-time ones are n/a)");
  sub->add_flag("--query-aware", o->query_aware, "Compress with the question at the end of the context "
                "(default: query-agnostic, the question is appended after compression)");
  sub->add_option("--haystack", o->haystack, kHaystackHelp)->capture_default_str()->transform(HaystackName());
  sub->add_option("-t,--threads", o->threads, "Threads (0: all cores)")->capture_default_str()->check(NonNegative());
  AddRopeFlags(sub, &o->rope);
  sub->add_option("--out", o->out, "Report folder (default: kvtrim-eval-<timestamp>)");
  sub->add_option("--json", o->json, "JSON report path (default: <out>/report.json)");
  sub->add_option("--csv", o->csv, "CSV report path (default: <out>/report.csv)");
  sub->add_flag("--no-plots", o->no_plots, "Do not render plots");
  UseReferenceDefaults(&o->kv);
  AddKvFlags(sub, &o->kv, /*with_policy=*/false, /*with_quality=*/true);
  return {sub, [o]() { return EvalAction(*o); }};
}

}  // namespace kvtrim::cli
