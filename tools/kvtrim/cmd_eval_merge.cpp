// `kvtrim eval-merge DIR...`: combine the partial reports of a sharded sweep
// (`kvtrim eval --shard i/n`) into the report a single run gives.
#include <cstdio>

#include "commands.h"
#include "kvtrim/eval_report.h"
#include "eval_output.h"

namespace kvtrim::cli {

Command AddEvalMerge(CLI::App& app) {
  struct Opts {
    std::vector<std::string> dirs;
    std::string out = "kvtrim-eval-merged", json, csv;
    bool no_plots = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand("eval-merge", "Merge the partial reports of `kvtrim eval --shard i/n` runs");
  sub->add_option("dirs", o->dirs, "Report folders of the shards")->required()->check(CLI::ExistingDirectory);
  sub->add_option("--out", o->out, "Merged report folder")->capture_default_str();
  sub->add_option("--json", o->json, "JSON report path (default: <out>/report.json)");
  sub->add_option("--csv", o->csv, "CSV report path (default: <out>/report.csv)");
  sub->add_flag("--no-plots", o->no_plots, "Do not render plots");
  auto action = [o]() -> int {
    std::vector<eval::Report> parts;
    for (const auto& d : o->dirs) {
      auto r = eval::ReadReportDir(d);
      if (!r.ok()) {
        std::fprintf(stderr, "kvtrim eval-merge: %s\n", r.error().message.c_str());
        return 1;
      }
      parts.push_back(std::move(r.value()));
    }
    auto merged = eval::MergeReports(parts);
    if (!merged.ok()) {
      std::fprintf(stderr, "kvtrim eval-merge: %s\n", merged.error().message.c_str());
      return 1;
    }
    auto files = WriteReportFolder(merged.value(), {o->out, o->json, o->csv, !o->no_plots});
    if (!files.ok()) {
      std::fprintf(stderr, "kvtrim eval-merge: %s\n", files.error().message.c_str());
      return 1;
    }
    std::fprintf(stderr, "kvtrim eval-merge: %zu reports, %d units; wrote", parts.size(), merged->meta.units_total);
    for (const auto& f : files.value()) std::fprintf(stderr, " %s", f.c_str());
    std::fprintf(stderr, "\n");
    return 0;
  };
  return {sub, action};
}

}  // namespace kvtrim::cli
