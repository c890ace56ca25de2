#include "kv/option_table.h"

#include <cmath>
#include <iomanip>
#include <sstream>

namespace kvtrim::kv {

const std::vector<KvOptionSpec>& KvOptionTable() {
  using S = KvOptionSpec::Scope;
  constexpr double kAny = std::numeric_limits<double>::infinity();
  static const std::vector<KvOptionSpec> t = {
      {"kv", "KV policy (see `kvtrim policies`)", &KvOptions::policy, S::kPolicy},
      // (0, 1] is checked where the options are used, for every caller alike.
      {"kv-ratio", "Retention ratio in (0, 1]", &KvOptions::ratio},
      {"kv-budget", "Per-head token budget (overrides --kv-ratio)", &KvOptions::budget_tokens, S::kAll, 1, 2147483647},
      // The type is checked where it is parsed (ParseKvQuant), for every caller alike.
      {"kv-quant", "Storage of kept entries: f32, f16, q8_0, q4_0 (after eviction)", &KvOptions::quant},
      {"profile", "Model profile file from `kvtrim profile` (razor; default: profile in-process)",
       &KvOptions::profile},
      {"head-budget",
       "How a layer's budget is shared by its KV heads: uniform, or adaptive (AdaKV: one top-k over the layer's "
       "per-head-normalised entry scores; policies that score entries)",
       &KvOptions::head_budget, S::kAll, -kAny, kAny, {"uniform", "adaptive"}},
      {"min-head-share", "--head-budget adaptive: every head keeps at least this share of the uniform per-head budget",
       &KvOptions::min_head_share, S::kAll, 0.0, 1.0},
      {"kv-quality",
       "Quality target TAU in (0, 1]: the retention ratio is chosen per context from --calibration (overrides "
       "--kv-ratio)",
       &KvOptions::quality, S::kQuality, 0.0, 1.0},
      {"calibration", "Calibration file written by `kvtrim calibrate`", &KvOptions::calibration, S::kQuality},
      {"check-finite",
       "Verify the cache after every compression (finite keys/values, no NaN log-weight) and name the policy that "
       "broke it (always on in debug builds)",
       &KvOptions::check_finite, S::kAll, -kAny, kAny, {}, true},
  };
  return t;
}

std::string KvOptionDefault(const KvOptionSpec& s) {
  const KvOptions d;
  std::ostringstream os;
  std::visit([&](auto field) { os << d.*field; }, s.field);
  return os.str();
}

std::string KvOptionsMarkdown() {
  std::ostringstream os;
  os << "# KV flags\n\n"
        "Generated from the option table (`src/kv/option_table.cpp`) by `kvtrim policies --options`;\n"
        "`tests/option_table_test.cpp` keeps this file equal to it. The policies' own flags are listed by\n"
        "`kvtrim policies`. `--head-budgets` / `--no-head-budgets` (profile head budgets on / off; by\n"
        "default on for policies that take them, `am`) follow `--profile`.\n\n"
        "| flag | default | accepted | where | meaning |\n|---|---|---|---|---|\n";
  for (const KvOptionSpec& s : KvOptionTable()) {
    std::string accepted;
    for (const std::string& c : s.choices) accepted += (accepted.empty() ? "" : ", ") + c;
    if (std::isfinite(s.lo) || std::isfinite(s.hi)) {
      std::ostringstream r;
      r << std::setprecision(12) << "[" << s.lo << ", " << s.hi << "]";
      accepted = r.str();
    }
    const char* where = s.scope == KvOptionSpec::Scope::kPolicy    ? "run, bench, serve"
                        : s.scope == KvOptionSpec::Scope::kQuality ? "run, bench, eval"
                                                                   : "every command with KV flags";
    std::string def = s.is_flag ? "off" : KvOptionDefault(s);
    if (def.empty()) def = "(none)";
    os << "| `--" << s.name << "` | " << def << " | " << (accepted.empty() ? "any" : accepted) << " | " << where
       << " | " << s.help << " |\n";
  }
  return os.str();
}

}  // namespace kvtrim::kv
