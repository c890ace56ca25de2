// `kvtrim policies`: the registered KV policies with their flags and defaults.
#include <cstdio>

#include "commands.h"
#include "kv/policy.h"

namespace kvtrim::cli {

Command AddPolicies(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("policies", "List the KV-cache policies with their flags and defaults");
  auto action = []() -> int {
    std::printf("KV policies (choose with --kv NAME; budget with --kv-ratio R or --kv-budget TOKENS;\n"
                "storage of kept entries with --kv-quant f32|f16|q8_0|q4_0):\n\n");
    for (const auto& p : kv::Registry()) {
      std::printf("%-13s %s\n", p.name.c_str(), p.summary.c_str());
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
