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
    d.params = info.params;
    kv::Params defaults;
    for (const kv::ParamSpec& p : info.params) defaults[p.name] = p.def;
    const kv::PolicyTraits t = kv::TraitsOf(info, defaults);  // read, never built
    d.costly = t.costly;
    d.adaptive = kv::TakesAdaptiveBudgets(t);
    d.prefill_time = t.prefill_time;
    d.stream_blocker = kv::StreamBlocker(t);
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<std::pair<std::string, double>> PolicyCounterRates(
    const std::string& policy, const std::vector<std::pair<std::string, int64_t>>& counters) {
  return kv::CounterRates(policy, counters);
}

}  // namespace kvtrim
