// `kvtrim profile`: the RazorAttention probe (METHODS.md section 2). Writes
// the model profile (JSON), prints echo/induction scores per layer and the
// retrieval heads chosen, and draws the two heatmaps.
#include <cstdio>
#include <filesystem>

#include "checks.h"
#include "model_flags.h"
#include "commands.h"
#include "kvtrim/eval_heatmap.h"
#include "kvtrim/eval_tasks.h"
#include "kvtrim/engine.h"
#include "kvtrim/head_budgets.h"
#include "kvtrim/profile.h"

namespace kvtrim::cli {

namespace {

void PrintScores(const ModelProfile& p) {
  std::vector<char> ret(p.echo.size(), 0);
  for (int q : p.heads.query) ret[q] = 1;
  std::printf("%-6s %-*s  %s\n", "layer", 7 * p.n_head, "echo score per query head", "induction score per query head");
  for (int l = 0; l < p.n_layer; ++l) {
    std::printf("%-6d", l);
    for (const auto* s : {&p.echo, &p.induction}) {
      for (int h = 0; h < p.n_head; ++h) {
        const size_t q = static_cast<size_t>(l) * p.n_head + h;
        std::printf(" %5.3f%c", (*s)[q], ret[q] ? '*' : ' ');
      }
      std::printf(" ");
    }
    std::printf("\n");
  }
}

void PrintHeads(const ModelProfile& p, int64_t depth, int sinks, int min_window) {
  std::printf("* retrieval query heads (top %d by echo, top %d by induction of %d):", p.heads.n_echo,
              p.heads.n_induction, p.n_layer * p.n_head);
  for (int q : p.heads.query) std::printf(" L%dH%d", q / p.n_head, q % p.n_head);
  std::printf("\nretrieval KV heads (GQA promotion, %d query heads per KV head):", p.n_head / p.n_head_kv);
  int n_kv = 0;
  for (size_t i = 0; i < p.heads.kv.size(); ++i)
    if (p.heads.kv[i]) {
      std::printf(" L%dK%d", static_cast<int>(i) / p.n_head_kv, static_cast<int>(i) % p.n_head_kv);
      ++n_kv;
    }
  std::printf("\nf_ret = %.4f (%d of %zu KV heads)\n", p.heads.f_ret, n_kv, p.heads.kv.size());
  std::printf("min reachable retention ratio at N = %lld (sinks %d, min window %d): %.4f\n",
              static_cast<long long>(depth), sinks, min_window, MinReachableRatio(p.heads, depth, sinks, min_window));
}

Status DrawHeatmaps(const ModelProfile& p, const std::string& dir) {
  std::vector<char> ret(p.echo.size(), 0);
  for (int q : p.heads.query) ret[q] = 1;
  for (const auto& [name, values] : {std::pair{std::string("echo"), &p.echo}, {std::string("induction"), &p.induction}}) {
    eval::Heatmap h;
    h.name = "profile_" + name;
    h.title = name + " score, " + p.model.file + " (boxed: retrieval query heads)";
    h.rows = p.n_layer;
    h.cols = p.n_head;
    h.values = *values;
    h.marked = ret;
    auto files = eval::WriteHeatmap(h, dir);
    if (!files.ok()) return files.error();
    std::printf("heatmap: %s\n", files.value().back().c_str());
  }
  return {};
}

std::string DefaultProfileHaystack() { return HaystackPath("frankenstein"); }

struct HeadBudgetFlags {
  bool on = false;
  double ratio = 0.1;
  int contexts = 4, tokens = 832, continuation = 128;
  uint64_t seed = 1;
  std::string haystack = DefaultProfileHaystack();
};

Status AddHeadBudgets(const Engine& e, const HeadBudgetFlags& f, ModelProfile* p) {
  auto ctxs = HeadBudgetContexts(e, f.haystack, f.contexts, f.tokens, f.continuation, f.seed);
  if (!ctxs.ok()) return ctxs.error();
  HeadBudgetMeasureOptions mo;
  mo.ratio = f.ratio;
  mo.continuation = f.continuation;
  mo.seed = f.seed;
  std::printf("head budgets: %d calibration contexts of %d + %d tokens (seed %llu), policy am, baseline ratio %g\n",
              f.contexts, f.tokens, f.continuation, static_cast<unsigned long long>(f.seed), f.ratio);
  auto hb = MeasureHeadBudgets(e, ctxs.value(), mo, [](const std::string& s) {
    std::printf("%s\n", s.c_str());
    std::fflush(stdout);
  });
  if (!hb.ok()) return hb.error();
  const StoredHeadBudgets& b = hb.value();
  std::printf("head budgets measured in %.1f s; mean KL per continuation token at each ratio, units of 1/%d:\n",
              b.seconds, b.units_per_head);
  std::printf("%-6s", "head");
  for (double r : b.sensitivity.ratios) std::printf(" %8.4g", r);
  std::printf(" %6s %8s\n", "units", "share");
  const double mean = static_cast<double>(b.ratio) * b.units_per_head;
  for (size_t i = 0; i < b.units.size(); ++i) {
    std::printf("L%dK%-3d", static_cast<int>(i) / p->n_head_kv, static_cast<int>(i) % p->n_head_kv);
    for (double v : b.sensitivity.loss[i]) std::printf(" %8.4f", v);
    std::printf(" %6d %7.2fx\n", b.units[i], b.units[i] / mean);
  }
  SetHeadBudgets(p, b);
  return {};
}

struct ProfileOpts {
  RopeOverrides rope;
  std::string model, out = "profile.json", plots;
  int threads = 0, sinks = 4, min_window = 64, ctx = 0;
  int64_t depth = 0;
  bool no_plots = false;
  ProfileOptions po;
  HeadBudgetFlags hb;
};

int ProfileAction(const ProfileOpts& o) {
  std::unique_ptr<Engine> engine = LoadEngine("profile", o.model, o.threads, o.rope, o.ctx);
  if (!engine) return 1;
  auto p = ProfileModel(*engine, o.po);
  if (!p.ok()) {
    std::fprintf(stderr, "kvtrim profile: %s\n", p.error().message.c_str());
    return 1;
  }
  std::printf("profile of %s: probe BOS + %d x %d random tokens (seed %llu), %d tokens in %.3f s (%d threads)\n",
              p->model.file.c_str(), p->repeats, p->probe_len, static_cast<unsigned long long>(p->seed),
              1 + p->repeats * p->probe_len, p->seconds, engine->threads());
  PrintScores(p.value());
  PrintHeads(p.value(), o.depth > 0 ? o.depth : engine->context_length(), o.sinks, o.min_window);
  if (o.hb.on) {
    Status hs = AddHeadBudgets(*engine, o.hb, &p.value());
    if (!hs.ok()) {
      std::fprintf(stderr, "kvtrim profile: %s\n", hs.message().c_str());
      return 1;
    }
  }
  Status st = WriteProfile(o.out, p.value());
  if (!st.ok()) {
    std::fprintf(stderr, "kvtrim profile: %s\n", st.message().c_str());
    return 1;
  }
  std::printf("profile: %s\n", o.out.c_str());
  if (o.no_plots) return 0;
  std::string dir = o.plots.empty() ? std::filesystem::path(o.out).parent_path().string() : o.plots;
  if (dir.empty()) dir = ".";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  st = DrawHeatmaps(p.value(), dir);
  if (!st.ok()) {
    std::fprintf(stderr, "kvtrim profile: %s\n", st.message().c_str());
    return 1;
  }
  return 0;
}

}  // namespace

Command AddProfile(CLI::App& app) {
  auto o = std::make_shared<ProfileOpts>();
  o->model = DefaultModelPath();
  CLI::App* sub = app.add_subcommand("profile", "Find retrieval heads (RazorAttention probe); write the model profile");
  sub->add_option("-m,--model", o->model, "GGUF model file")->capture_default_str();
  sub->add_option("--out", o->out, "Profile file to write (JSON)")->capture_default_str();
  sub->add_option("--probe-len", o->po.probe_len, "Random block length K (0: min(2500, ctx/4 - 1))")
      ->capture_default_str()->check(NonNegative());
  sub->add_option("--seed", o->po.seed, "Seed of the random block")->capture_default_str();
  sub->add_option("--echo-frac", o->po.echo_frac, "Top fraction of query heads by echo score")
      ->capture_default_str()->check(CLI::Range(1e-9, 1.0));
  sub->add_option("--induction-frac", o->po.induction_frac, "Top fraction of query heads by induction score")
      ->capture_default_str()->check(CLI::Range(1e-9, 1.0));
  sub->add_option("--plots", o->plots, "Directory for the heatmaps (default: the profile's directory)");
  sub->add_flag("--no-plots", o->no_plots, "Do not draw the heatmaps");
  sub->add_option("--depth", o->depth, "Sequence length N for the min reachable ratio (0: the model's context)")
      ->capture_default_str()->check(NonNegative());
  sub->add_option("--sinks", o->sinks, "Sinks for the min reachable ratio")->capture_default_str();
  sub->add_option("--min-window", o->min_window, "Minimum window S0 for the min reachable ratio")->capture_default_str();
  sub->add_flag("--head-budgets", o->hb.on,
                "Also measure nonuniform per-KV-head budgets for am (METHODS.md section 4) into the profile");
  sub->add_option("--head-budget-ratio", o->hb.ratio, "Baseline ratio r of the head-budget search")
      ->capture_default_str()->check(CLI::Range(1e-6, 0.999999));
  sub->add_option("--calib-contexts", o->hb.contexts, "Head budgets: calibration contexts from the haystack")
      ->capture_default_str()->check(Positive());
  sub->add_option("--calib-tokens", o->hb.tokens, "Head budgets: tokens per calibration context (BOS included)")
      ->capture_default_str()->check(Positive());
  sub->add_option("--calib-continuation", o->hb.continuation, "Head budgets: teacher-forced tokens the KL is taken on")
      ->capture_default_str()->check(Positive());
  sub->add_option("--calib-seed", o->hb.seed, "Head budgets: seed of the first calibration context")->capture_default_str();
  sub->add_option("--haystack", o->hb.haystack, "Head budgets: text the calibration contexts come from")
      ->capture_default_str();
  sub->add_option("-t,--threads", o->threads, "Threads (0: all cores)")->capture_default_str()->check(NonNegative());
  AddRopeFlags(sub, &o->rope);
  AddCtxFlag(sub, &o->ctx, "Context length the model is read at (0: its own; past its trained context with RoPE "
             "scaling); the probe length and --depth default follow it");
  return {sub, [o]() { return ProfileAction(*o); }};
}

}  // namespace kvtrim::cli
