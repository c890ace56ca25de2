#include "kv_flags.h"

#include <algorithm>
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
    if (s.name == "kv") f->policy_opt = opt;
    if (s.name == "kv-quant") f->quant_opt = opt;
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
  for (size_t i = first; i < opts.size(); ++i) {
    opts[i]->group("KV cache");
    f->all.push_back(opts[i]);
  }
}

bool KvFlags::any_given() const {
  return std::any_of(all.begin(), all.end(), [](const CLI::Option* o) { return o->count() > 0; });
}

void AddCacheTypeFlags(CLI::App* sub, KvFlags* f) {
  sub->add_option("--cache-type-k", f->cache_type_k, "llama.cpp's -ctk: the KV type (as --kv-quant; K and V "
                  "share one type here, so -ctv must agree)")->group("KV cache");
  sub->add_option("--cache-type-v", f->cache_type_v, "llama.cpp's -ctv: the KV type (as --kv-quant; must agree "
                  "with -ctk)")->group("KV cache");
}

Status ApplyCacheTypes(KvFlags* f) {
  const std::string& k = f->cache_type_k;
  const std::string& v = f->cache_type_v;
  if (k.empty() && v.empty()) return {};
  const bool quant_given = f->quant_opt && f->quant_opt->count() > 0;
  const std::string base = f->kv.quant;  // --kv-quant's value, given or the command's default
  const std::string kt = k.empty() ? base : k, vt = v.empty() ? base : v;
  if (kt != vt)
    return MakeError("K and V are stored in one type here: the K type " + kt + (k.empty() ? " (--kv-quant or its default)" : "") +
                     " and the V type " + vt + (v.empty() ? " (--kv-quant or its default)" : "") +
                     " differ; give -ctk and -ctv the same type");
  if (quant_given && kt != base)
    return MakeError("--kv-quant " + base + " and the cache type " + kt + " (-ctk/-ctv) differ");
  f->kv.quant = kt;
  return {};
}

std::vector<std::string> KvFlagWarnings(const KvFlags& f) {
  std::vector<std::string> w;
  const bool policy_given = f.policy_opt && f.policy_opt->count() > 0;
  if (f.kv.policy == "full") {
    std::string flags;
    for (const char* name : {"--kv-ratio", "--kv-budget", "--kv-threshold", "--kv-quality"})
      for (const CLI::Option* o : f.all)
        if (o->count() > 0 && o->check_name(name)) flags += std::string(flags.empty() ? "" : ", ") + name;
    if (!flags.empty())
      w.push_back(flags + (policy_given ? " given with --kv full" : " given without --kv") +
                  ": the full cache keeps every token, so it has no effect (choose a policy with --kv; `kvtrim "
                  "policies` lists them)");
  }
  return w;
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
