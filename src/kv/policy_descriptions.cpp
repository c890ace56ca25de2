// The registry as plain descriptions (include/kvtrim/policies.h).
#include "kv/policy.h"
#include "kvtrim/policies.h"

namespace kvtrim {

std::vector<PolicyDescription> DescribePolicies() {
  std::vector<PolicyDescription> out;
  for (const kv::PolicyInfo& info : kv::Registry()) {
    PolicyDescription d;
    d.name = info.name;
    d.summary = info.summary;
    for (const kv::ParamSpec& p : info.params) d.params.push_back({p.name, p.def, p.help, p.lo, p.hi, p.choices, p.is_flag});
    d.costly = info.traits.costly;
    if (auto made = kv::MakePolicy(info.name, {}); made.ok()) {
      d.adaptive = kv::TakesAdaptiveBudgets(*made.value());
      d.prefill_time = made.value()->prefill_time();
      d.stream_blocker = made.value()->StreamBlocker();
    }
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<std::pair<std::string, double>> PolicyCounterRates(
    const std::string& policy, const std::vector<std::pair<std::string, int64_t>>& counters) {
  return kv::CounterRates(policy, counters);
}

}  // namespace kvtrim
