#include "kv_flags.h"

#include <cmath>
#include <iomanip>
#include <sstream>
#include <set>
#include <type_traits>
#include <utility>
#include <vector>

#include "kvtrim/option_table.h"
#include "kvtrim/policies.h"

namespace kvtrim::cli {

namespace {

// The table's range as a CLI check: "1.5 is outside (0, 1]" (lo_open: lo
// itself is out), the same words the library and the server use.
CLI::Validator RangeOf(const KvOptionSpec& s) {
  std::ostringstream r;
  r << std::setprecision(12) << (s.lo_open ? "(" : "[") << s.lo << ", " << s.hi << "]";
  const std::string range = r.str();
  return CLI::Validator(
      [lo = s.lo, hi = s.hi, open = s.lo_open, range](std::string& v) -> std::string {
        double x = 0;
        if (!CLI::detail::lexical_cast(v, x)) return v + " is not a number";
        const bool ok = (open ? x > lo : x >= lo) && x <= hi;
        return ok ? std::string() : v + " is outside " + range;
      },
      range);
}

// One option of the table as a CLI flag bound to its KvOptions field.
CLI::Option* AddTableOption(CLI::App* sub, KvOptions* kv, const KvOptionSpec& s) {
  const std::string flag = "--" + s.name;
  CLI::Option* opt = std::visit(
      [&](auto field) -> CLI::Option* {
        using T = std::remove_reference_t<decltype(kv->*field)>;
        if constexpr (std::is_same_v<T, bool>) return sub->add_flag(flag, kv->*field, s.help);
        else return sub->add_option(flag, kv->*field, s.help)->capture_default_str();
      },
      s.field);
  if (std::isfinite(s.lo) || std::isfinite(s.hi)) opt->check(RangeOf(s));
  if (!s.choices.empty()) opt->check(CLI::IsMember(s.choices));
  return opt;
}

}  // namespace

void UseServingDefaults(KvFlags* f) {
  f->kv.quant = "f16";
  f->kv.quant_at = "write";
}

void UseReferenceDefaults(KvFlags* f) {
  f->kv.quant = "f32";
  f->kv.quant_at = "kept";
}

void AddKvFlags(CLI::App* sub, KvFlags* f, bool with_policy, bool with_quality) {
  const size_t first = sub->get_options().size();  // options added from here on are the KV ones
  using Scope = KvOptionSpec::Scope;
  for (const KvOptionSpec& s : KvOptionTable()) {
    if ((s.scope == Scope::kPolicy && !with_policy) || (s.scope == Scope::kQuality && !with_quality)) continue;
    CLI::Option* opt = AddTableOption(sub, &f->kv, s);
    if (s.name == "kv-ratio") f->ratio_opt = opt;
    if (s.name == "profile") {  // the tri-state per-head-budget switches follow the profile they read
      sub->add_flag("--head-budgets", f->head_budgets,
                    "Nonuniform per-head budgets from the --profile (kvtrim profile --head-budgets), scaled to the "
                    "ratio; policies that take them by default (am) use them when the profile has them");
      sub->add_flag("--no-head-budgets", f->no_head_budgets, "Uniform per-head budgets even for am with such a profile")
          ->excludes("--head-budgets");
    }
  }
  std::set<std::string> seen;
  for (const PolicyDescription& info : DescribePolicies()) {
    for (const auto& p : info.params) {
      if (!seen.insert(p.name).second) continue;
      std::string help = p.help + " [policy flag]";
      if (p.is_flag) f->options[p.name] = sub->add_flag("--" + p.name, f->params[p.name], help);
      else f->options[p.name] = sub->add_option("--" + p.name, f->params[p.name], help);
      if (!p.choices.empty()) {  // a named choice: the name (or its index) becomes the index
        std::vector<std::pair<std::string, std::string>> names;
        for (size_t i = 0; i < p.choices.size(); ++i) names.emplace_back(p.choices[i], std::to_string(i));
        f->options[p.name]->transform(CLI::CheckedTransformer(names));
      }
    }
  }
  // Every option added here is listed under "KV cache" in the command's help.
  const std::vector<CLI::Option*> opts = sub->get_options();
  for (size_t i = first; i < opts.size(); ++i) opts[i]->group("KV cache");
}

KvOptions ToKvOptions(const KvFlags& f, const std::string& policy) {
  KvOptions o = f.kv;
  o.policy = policy;
  o.params.clear();
  o.ratio_explicit = f.ratio_opt && f.ratio_opt->count() > 0;
  o.head_budgets = f.head_budgets ? 1 : f.no_head_budgets ? 0 : -1;
  for (const auto& [name, opt] : f.options)
    if (opt->count() > 0) o.params[name] = f.params.at(name);
  return o;
}

}  // namespace kvtrim::cli
