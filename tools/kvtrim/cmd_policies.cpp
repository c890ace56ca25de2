// `kvtrim policies`: the registered KV policies with their flags and defaults.
#include <cstdio>
#include <memory>

#include "commands.h"
#include "kvtrim/option_table.h"
#include "kvtrim/policies.h"

namespace kvtrim::cli {

Command AddPolicies(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("policies", "List the KV-cache policies with their flags and defaults");
  auto options = std::make_shared<bool>(false);
  sub->add_flag("--options", *options, "List the KV flags every policy shares (Markdown: docs/flags-kv.md)");
  auto action = [options]() -> int {
    if (*options) {
      std::fputs(KvOptionsMarkdown().c_str(), stdout);
      return 0;
    }
    std::printf("KV policies (choose with --kv NAME; budget with --kv-ratio R or --kv-budget TOKENS;\n"
                "storage of kept entries with --kv-quant f32|f16|q8_0|q4_0;\n"
                "policies marked [adaptive] also take --head-budget adaptive --min-head-share S (default 0.2):\n"
                "AdaKV head budgets, one top-k over the layer's per-head-normalised entry scores, each head\n"
                "at least S of the uniform share, the layer's total unchanged; docs/policies-adaptive.md;\n"
                "every prefill-time policy compresses as it prefills with --prefill-chunk N unless it says\n"
                "why not; docs/prefill-chunk.md):\n\n");
    for (const PolicyDescription& p : DescribePolicies()) {
      std::printf("%-13s %s%s\n", p.name.c_str(), p.summary.c_str(), p.adaptive ? " [adaptive]" : "");
      if (p.prefill_time && !p.stream_blocker.empty())
        std::printf("  (no --prefill-chunk: %s)\n", p.stream_blocker.c_str());
      for (const auto& s : p.params)
        if (!s.choices.empty() && s.def >= 0 && s.def < static_cast<double>(s.choices.size()))
          std::printf("  --%-16s %-8s %s\n", s.name.c_str(), s.choices[static_cast<size_t>(s.def)].c_str(), s.help.c_str());
        else
          std::printf("  --%-16s %-8g %s\n", s.name.c_str(), s.def, s.help.c_str());
    }
    return 0;
  };
  return {sub, action};
}

}  // namespace kvtrim::cli
