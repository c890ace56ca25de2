// `kvtrim eval`: every method side by side on the same model and samples:
// needle-task accuracy, KL and NLL ratios, KV bytes; table, JSON, CSV, plots.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "commands.h"
#include "eval/report.h"
#include "eval/sweep.h"
#include "kv/policy.h"
#include "kv_flags.h"

namespace kvtrim::cli {
namespace {

std::string DefaultHaystack() {
  for (std::string base : {std::string("../shared"), std::string(KVTRIM_SOURCE_DIR) + "/../shared"}) {
    std::string p = base + "/data/frankenstein.txt";
    if (std::filesystem::exists(p)) return p;
  }
  return "../shared/data/frankenstein.txt";
}

std::string Timestamp() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", std::localtime(&t));
  return buf;
}

// A progress bar on stderr, redrawn in place; silent when stderr is not a terminal.
std::function<void(int, int)> ProgressBar() {
  if (!isatty(fileno(stderr))) return nullptr;
  auto start = std::make_shared<std::chrono::steady_clock::time_point>(std::chrono::steady_clock::now());
  return [start](int done, int total) {
    double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - *start).count();
    double eta = done > 0 ? el / done * (total - done) : 0;
    int w = 30, fill = total > 0 ? w * done / total : w;
    std::fprintf(stderr, "\r[%s%s] %d/%d samples, %.0f s, ETA %.0f s ", std::string(fill, '#').c_str(),
                 std::string(w - fill, '.').c_str(), done, total, el, eta);
    if (done == total) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  };
}

struct EvalOpts {
  std::string model, haystack, out, json, csv;
  std::vector<std::string> methods, tasks;
  std::vector<double> ratios = {1, 0.5, 0.25, 0.1};
  int samples = 16, threads = 0, context = 0, continuation = 256, needles = 4, queries = 2;
  uint64_t seed = 1;
  bool query_aware = false, no_fidelity = false, no_plots = false;
  KvFlags kv;
};

// The sweep the flags ask for.
Expected<eval::SweepOptions> ToSweepOptions(const EvalOpts& o) {
  eval::SweepOptions so;
  so.methods = o.methods;
  so.ratios = o.ratios;
  for (const auto& t : o.tasks) {
    auto k = eval::ParseTask(t);
    if (!k.ok()) return k.error();
    so.tasks.push_back(k.value());
  }
  so.fidelity = !o.no_fidelity;
  so.samples = o.samples;
  so.seed = o.seed;
  so.context_tokens = o.context;
  so.query_aware = o.query_aware;
  so.haystack = o.haystack;
  so.kv = ToKvOptions(o.kv, "full");
  so.fidelity_continuation = o.continuation;
  so.task.needles = o.needles;
  so.task.queries = o.queries;
  return so;
}

// Writes table.txt, the JSON and CSV reports and the plots under `out`;
// returns the files written. Plots are skipped with a warning if gnuplot fails.
Expected<std::vector<std::string>> WriteReport(const eval::Report& r, const EvalOpts& o, const std::string& out) {
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec) return MakeError("cannot create '" + out + "': " + ec.message());
  const std::string table = eval::FormatTable(r);
  std::fputs(table.c_str(), stdout);
  std::ofstream(out + "/table.txt") << table;
  std::vector<std::string> files = {out + "/table.txt"};
  for (auto [path, writer] : {std::pair{o.json.empty() ? out + "/report.json" : o.json, &eval::WriteJson},
                              std::pair{o.csv.empty() ? out + "/report.csv" : o.csv, &eval::WriteCsv}}) {
    Status st = writer(r, path);
    if (!st.ok()) return st.error();
    files.push_back(path);
  }
  if (!o.no_plots) {
    auto plots = eval::WritePlots(r, out);
    if (!plots.ok()) std::fprintf(stderr, "kvtrim eval: plots skipped: %s\n", plots.error().message.c_str());
    else files.insert(files.end(), plots->begin(), plots->end());
  }
  return files;
}

}  // namespace

Command AddEval(CLI::App& app) {
  auto o = std::make_shared<EvalOpts>();
  o->model = DefaultModelPath();
  o->haystack = DefaultHaystack();
  for (const auto& p : kv::Registry()) o->methods.push_back(p.name);
  for (auto k : eval::AllTasks()) o->tasks.push_back(eval::TaskName(k));
  CLI::App* sub = app.add_subcommand("eval", "Judge KV policies side by side: needle accuracy, KL, NLL ratio, memory");
  sub->add_option("-m,--model", o->model, "GGUF model file")->capture_default_str();
  sub->add_option("--methods", o->methods, "Policies to compare (full is always the reference)")
      ->delimiter(',')->capture_default_str();
  sub->add_option("--ratios", o->ratios, "Retention ratios")->delimiter(',')->capture_default_str();
  sub->add_option("--tasks", o->tasks, "Needle tasks (none: only fidelity)")->delimiter(',')->capture_default_str();
  sub->add_flag("--no-fidelity", o->no_fidelity, "Skip the KL/NLL fidelity task on plain text");
  sub->add_option("--samples", o->samples, "Samples per task")->capture_default_str()->check(CLI::PositiveNumber);
  sub->add_option("--seed", o->seed, "Seed of the task generators")->capture_default_str();
  sub->add_option("--context", o->context, "Context length in tokens, question included (0: model context - 48)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  sub->add_option("--continuation", o->continuation, "Fidelity: teacher-forced tokens after the compressed part")
      ->capture_default_str()->check(CLI::PositiveNumber);
  sub->add_option("--needles", o->needles, "Needles in multikey/multivalue/multiquery samples")->capture_default_str()
      ->check(CLI::Range(2, 16));
  sub->add_option("--queries", o->queries, "Keys asked in multiquery samples")->capture_default_str()->check(CLI::Range(1, 16));
  sub->add_flag("--query-aware", o->query_aware, "Compress with the question at the end of the context "
                "(default: query-agnostic, the question is appended after compression)");
  sub->add_option("--haystack", o->haystack, "Haystack text file (UTF-8)")->capture_default_str();
  sub->add_option("-t,--threads", o->threads, "Threads (0: all cores)")->capture_default_str()->check(CLI::NonNegativeNumber);
  sub->add_option("--out", o->out, "Report folder (default: kvtrim-eval-<timestamp>)");
  sub->add_option("--json", o->json, "JSON report path (default: <out>/report.json)");
  sub->add_option("--csv", o->csv, "CSV report path (default: <out>/report.csv)");
  sub->add_flag("--no-plots", o->no_plots, "Do not render plots");
  AddKvFlags(sub, &o->kv, /*with_policy=*/false);
  auto action = [o, sub]() -> int {
    auto engine = Engine::Load({o->model, o->threads});
    if (!engine.ok()) {
      std::fprintf(stderr, "kvtrim eval: %s\n", engine.error().message.c_str());
      return 1;
    }
    auto so_or = ToSweepOptions(*o);
    if (!so_or.ok()) {
      std::fprintf(stderr, "kvtrim eval: %s\n", so_or.error().message.c_str());
      return 1;
    }
    eval::SweepOptions so = std::move(so_or.value());
    so.progress = ProgressBar();
    std::fprintf(stderr, "kvtrim eval: %zu methods x %zu ratios, %zu needle tasks%s, %d samples each, %s\n",
                 so.methods.size(), so.ratios.size(), so.tasks.size(), so.fidelity ? " + fidelity" : "", so.samples,
                 so.query_aware ? "query-aware" : "query-agnostic");
    auto rep = eval::RunSweep(*engine.value(), so);
    if (!rep.ok()) {
      std::fprintf(stderr, "kvtrim eval: %s\n", rep.error().message.c_str());
      return 1;
    }
    eval::Report& r = rep.value();
    r.meta.model = o->model;
    r.meta.command = "kvtrim eval";
    for (const auto* opt : sub->get_options())
      if (opt->count() > 0 && !opt->get_name().empty()) r.meta.command += " " + opt->get_name() + " " + opt->as<std::string>();
    const std::string out = o->out.empty() ? "kvtrim-eval-" + Timestamp() : o->out;
    auto files = WriteReport(r, *o, out);
    if (!files.ok()) {
      std::fprintf(stderr, "kvtrim eval: %s\n", files.error().message.c_str());
      return 1;
    }
    std::fprintf(stderr, "kvtrim eval: %.1f s; wrote", r.meta.elapsed_s);
    for (const auto& f : files.value()) std::fprintf(stderr, " %s", f.c_str());
    std::fprintf(stderr, "\n");
    return 0;
  };
  return {sub, action};
}

}  // namespace kvtrim::cli
