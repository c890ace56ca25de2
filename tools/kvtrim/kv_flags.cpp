#include "kv_flags.h"

#include <set>
#include <utility>
#include <vector>

#include "kv/policy.h"

namespace kvtrim::cli {

void AddKvFlags(CLI::App* sub, KvFlags* f, bool with_policy, bool with_quality) {
  const size_t first = sub->get_options().size();  // options added from here on are the KV ones
  if (with_policy) sub->add_option("--kv", f->policy, "KV policy (see `kvtrim policies`)")->capture_default_str();
  f->ratio_opt = sub->add_option("--kv-ratio", f->ratio, "Retention ratio in (0, 1]")->capture_default_str();
  sub->add_option("--kv-budget", f->budget, "Per-head token budget (overrides --kv-ratio)")->check(CLI::PositiveNumber);
  sub->add_option("--kv-quant", f->quant, "Storage of kept entries: f32, f16, q8_0, q4_0 (after eviction)")
      ->capture_default_str();
  sub->add_option("--profile", f->profile, "Model profile file from `kvtrim profile` (razor; default: profile in-process)");
  sub->add_flag("--head-budgets", f->head_budgets,
                "Nonuniform per-head budgets from the --profile (kvtrim profile --head-budgets), scaled to the "
                "ratio; am uses them by default when the profile has them");
  sub->add_flag("--no-head-budgets", f->no_head_budgets, "Uniform per-head budgets even for am with such a profile")
      ->excludes("--head-budgets");
  sub->add_option("--head-budget", f->head_budget,
                  "How a layer's budget is shared by its KV heads: uniform, or adaptive (AdaKV: one top-k over "
                  "the layer's per-head-normalised entry scores; policies that score entries)")
      ->check(CLI::IsMember({"uniform", "adaptive"}))
      ->capture_default_str();
  sub->add_option("--min-head-share", f->min_head_share,
                  "--head-budget adaptive: every head keeps at least this share of the uniform per-head budget")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  if (with_quality) {
    sub->add_option("--kv-quality", f->quality,
                    "Quality target TAU in (0, 1]: the retention ratio is chosen per context from --calibration "
                    "(overrides --kv-ratio)")
        ->check(CLI::Range(0.0, 1.0));
    sub->add_option("--calibration", f->calibration, "Calibration file written by `kvtrim calibrate`");
  }
  sub->add_flag("--check-finite", f->check_finite,
                "Verify the cache after every compression (finite keys/values, no NaN log-weight) and name the "
                "policy that broke it (always on in debug builds)");
  std::set<std::string> seen;
  for (const auto& info : kv::Registry()) {
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
  KvOptions o;
  o.policy = policy;
  o.ratio = f.ratio;
  o.ratio_explicit = f.ratio_opt && f.ratio_opt->count() > 0;
  o.budget_tokens = f.budget;
  o.quant = f.quant;
  o.profile = f.profile;
  o.head_budgets = f.head_budgets ? 1 : f.no_head_budgets ? 0 : -1;
  o.head_budget = f.head_budget;
  o.min_head_share = f.min_head_share;
  o.quality = f.quality;
  o.calibration = f.calibration;
  o.check_finite = f.check_finite;
  for (const auto& [name, opt] : f.options)
    if (opt->count() > 0) o.params[name] = f.params.at(name);
  return o;
}

}  // namespace kvtrim::cli
