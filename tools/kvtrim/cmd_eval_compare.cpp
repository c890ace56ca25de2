// `kvtrim eval-compare A B`: two eval runs (or two methods of one run)
// compared sample by sample: accuracy, retention against each run's full
// cache with its Wilson 95% interval, and McNemar's exact test; on the
// fidelity tasks the paired KL difference with its interval and a sign test.
#include <cstdio>

#include "commands.h"
#include "kvtrim/eval_paired.h"
#include "kvtrim/eval_report.h"

namespace kvtrim::cli {

Command AddEvalCompare(CLI::App& app) {
  struct Opts {
    std::string a, b, method_a, method_b;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand(
      "eval-compare",
      "Compare two eval runs on the same samples: retention (the share of the full cache's right answers a method "
      "keeps) with its Wilson 95% interval, and McNemar's exact test between the two; on the fidelity tasks, the "
      "paired KL difference with its 95% interval and an exact sign test");
  sub->add_option("a", o->a, "Report folder of the first run")->required()->check(CLI::ExistingDirectory);
  sub->add_option("b", o->b, "Report folder of the second run (the same folder: two methods of one run)")
      ->required()
      ->check(CLI::ExistingDirectory);
  sub->add_option("--method", o->method_a, "Method of the first run")->required();
  sub->add_option("--method-b", o->method_b, "Method of the second run (default: --method; full: the full cache)");
  auto action = [o]() -> int {
    auto a = eval::ReadReportDir(o->a);
    auto b = a.ok() ? eval::ReadReportDir(o->b) : a;
    if (!a.ok() || !b.ok()) {
      std::fprintf(stderr, "kvtrim eval-compare: %s\n", (!a.ok() ? a : b).error().message.c_str());
      return 1;
    }
    const std::string mb = o->method_b.empty() ? o->method_a : o->method_b;
    const std::string name_a = o->a + " " + o->method_a, name_b = o->b + " " + mb;
    auto rows = eval::ComparePaired(a.value(), o->method_a, b.value(), mb);
    auto kl = eval::ComparePairedKl(a.value(), o->method_a, b.value(), mb);
    if (!kl.ok() || (!rows.ok() && kl->empty())) {  // nothing to pair on either kind of task
      std::fprintf(stderr, "kvtrim eval-compare: %s\n", (!rows.ok() ? rows.error() : kl.error()).message.c_str());
      return 1;
    }
    if (rows.ok()) std::fputs(eval::FormatPaired(rows.value(), name_a, name_b).c_str(), stdout);
    if (!kl->empty()) std::fputs(((rows.ok() ? "\n" : "") + eval::FormatPairedKl(kl.value(), name_a, name_b)).c_str(), stdout);
    return 0;
  };
  return {sub, action};
}

}  // namespace kvtrim::cli
