// `kvtrim calibrate`: fit the per-method quality curve f(r; alpha NLL(c) + beta)
// on needle and plain-text contexts (METHODS.md section 3), check it on
// held-out contexts, and write the fit file that --kv-quality reads.

#include <cstdio>
#include <filesystem>

#include "checks.h"
#include "commands.h"
#include "kvtrim/eval_calibrate.h"
#include "kvtrim/eval_sweep.h"
#include "kv_flags.h"
#include "model_flags.h"
#include "progress.h"

namespace kvtrim::cli {
namespace {

struct CalibOpts {
  RopeOverrides rope;
  std::string model, out = "calib.json", plots;
  std::vector<std::string> methods = {"compactor"}, tasks = {"niah", "passkey"}, haystacks;
  std::vector<double> ratios = {0.1, 0.25, 0.5, 0.75}, taus = {0.9, 0.95};
  int samples = 8, threads = 0, context = 0, continuation = 64;
  uint64_t seed = 1;
  double holdout = 0.25, penalty = 4;
  bool no_fidelity = false;
  KvFlags kv;
};

int Run(const CalibOpts& o) {
  // --context past the model's context: the sessions get that much room, as in eval.
  const int room = o.context > 0 ? o.context + eval::kAnswerRoom : 0;
  std::unique_ptr<Engine> engine = LoadEngine("calibrate", o.model, o.threads, o.rope, room);
  if (!engine) return 1;
  eval::CalibrateOptions co;
  co.methods = o.methods;
  co.ratios = o.ratios;
  co.tasks.clear();
  for (const auto& t : o.tasks) {
    auto k = eval::ParseTask(t);
    if (!k.ok()) {
      std::fprintf(stderr, "kvtrim calibrate: %s\n", k.error().message.c_str());
      return 1;
    }
    co.tasks.push_back(k.value());
  }
  co.fidelity = !o.no_fidelity;
  co.haystacks = o.haystacks.empty() ? std::vector<std::string>{DefaultHaystackPath()} : o.haystacks;
  co.samples = o.samples;
  co.seed = o.seed;
  co.context_tokens = o.context;
  co.continuation = o.continuation;
  co.holdout = o.holdout;
  co.taus = o.taus;
  co.penalty = o.penalty;
  co.kv = ToKvOptions(o.kv, "full");
  co.progress = CountProgress("kvtrim calibrate", "contexts");
  auto res = eval::RunCalibrate(*engine, co);
  if (!res.ok()) {
    std::fprintf(stderr, "kvtrim calibrate: %s\n", res.error().message.c_str());
    return 1;
  }
  std::fputs(eval::FormatCalibration(res.value()).c_str(), stdout);
  Status st = eval::WriteCalibration(res.value(), co, o.model, o.out);
  if (!st.ok()) {
    std::fprintf(stderr, "kvtrim calibrate: %s\n", st.message().c_str());
    return 1;
  }
  std::fprintf(stderr, "kvtrim calibrate: wrote %s\n", o.out.c_str());
  if (!o.plots.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.plots, ec);
    auto files = eval::WriteCalibrationPlots(res.value(), o.plots);
    if (!files.ok()) std::fprintf(stderr, "kvtrim calibrate: plots skipped: %s\n", files.error().message.c_str());
    else
      for (const auto& f : files.value()) std::fprintf(stderr, "kvtrim calibrate: wrote %s\n", f.c_str());
  }
  return 0;
}

}  // namespace

Command AddCalibrate(CLI::App& app) {
  auto o = std::make_shared<CalibOpts>();
  o->model = DefaultModelPath();
  CLI::App* sub = app.add_subcommand("calibrate", "Fit the context-calibrated quality curve per method (for --kv-quality)");
  sub->add_option("-m,--model", o->model, "GGUF model file")->capture_default_str();
  sub->add_option("--methods", o->methods, "Policies to calibrate")->delimiter(',')->capture_default_str();
  sub->add_option("--ratios", o->ratios, "Retention ratios measured")->delimiter(',')->capture_default_str();
  sub->add_option("--tasks", o->tasks, "Needle tasks (answer NLL)")->delimiter(',')->capture_default_str();
  sub->add_flag("--no-fidelity", o->no_fidelity, "Skip plain-text continuations");
  sub->add_option("--haystack", o->haystacks, "Haystack text files or names (several: more varied contexts)")
      ->transform(HaystackName());
  sub->add_option("--samples", o->samples, "Contexts per task and haystack")->capture_default_str()->check(Positive());
  sub->add_option("--seed", o->seed, "Seed of the task generators")->capture_default_str();
  sub->add_option("--context", o->context, "Context length in tokens (0: model context - 48; past the model's context with RoPE scaling, as eval)")->capture_default_str();
  sub->add_option("--continuation", o->continuation, "Plain text: teacher-forced tokens after the context")
      ->capture_default_str()->check(Positive());
  sub->add_option("--holdout", o->holdout, "Share of contexts kept out of the fit and checked at r*")
      ->capture_default_str()->check(CLI::Range(0.0, 0.95));
  sub->add_option("--tau", o->taus, "Quality targets checked on the held-out contexts")->delimiter(',')->capture_default_str();
  sub->add_option("--penalty", o->penalty, "Weight on residuals where the fit over-predicts quality")
      ->capture_default_str()->check(Positive());
  sub->add_option("-t,--threads", o->threads, "Threads (0: all cores)")->capture_default_str();
  sub->add_option("--out", o->out, "Calibration file to write")->capture_default_str();
  sub->add_option("--plots", o->plots, "Folder for the plots (predicted vs measured, r* distribution)");
  AddRopeFlags(sub, &o->rope);
  AddKvFlags(sub, &o->kv, /*with_policy=*/false);
  return {sub, [o]() { return Run(*o); }};
}

}  // namespace kvtrim::cli
