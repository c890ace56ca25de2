#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kv/policies/policies.h"
#include "kv/policy.h"

namespace kvtrim::kv {

const std::vector<PolicyInfo>& Registry() {
  static const std::vector<PolicyInfo> r = {
      FullPolicyInfo(),  WindowPolicyInfo(),       RandomPolicyInfo(), LruPolicyInfo(),
      H2oPolicyInfo(),   ScissorhandsPolicyInfo(), SnapkvPolicyInfo(), PyramidkvPolicyInfo(),
      KvslimmerPolicyInfo(), MergeMeanPolicyInfo(),
      RazorPolicyInfo(),
      CompactorPolicyInfo(),
      AmPolicyInfo(),
      TovaPolicyInfo(), KnormPolicyInfo(), KeydiffPolicyInfo(),
      KvzipPolicyInfo(),
      KvzipPlusPolicyInfo(),
      ExpectedAttentionPolicyInfo(),
  };
  return r;
}

std::string Policy::StreamBlocker() const {
  const ReferencePass rp = reference_pass();
  if (rp.repeat)
    return "it scores entries with a reference pass over the whole context, which a prefill in chunks has not "
           "seen when it compresses";
  if (budget().kind == budget::Kind::kShared) return "its one budget shared by every head needs every entry scored at once";
  return {};
}

const PolicyInfo* FindPolicy(const std::string& name) {
  for (const auto& p : Registry())
    if (p.name == name) return &p;
  return nullptr;
}

std::vector<std::pair<std::string, double>> CounterRates(const std::string& policy,
                                                         const std::vector<std::pair<std::string, int64_t>>& counters) {
  std::vector<std::pair<std::string, double>> out;
  const PolicyInfo* info = FindPolicy(policy);
  if (!info) return out;
  auto find = [&](const std::string& name) -> int64_t {
    for (const auto& [n, v] : counters)
      if (n == name) return v;
    return -1;
  };
  for (const CounterRate& r : info->traits.rates) {
    const int64_t num = find(r.numerator), den = find(r.denominator);
    if (num >= 0 && den > 0) out.emplace_back(r.label, 100.0 * static_cast<double>(num) / static_cast<double>(den));
  }
  return out;
}

Status CheckParam(const ParamSpec& s, double v) {
  auto num = [](double x) {
    char b[32];
    std::snprintf(b, sizeof b, "%.10g", x);
    return std::string(b);
  };
  const std::string flag = "flag --" + s.name + " = " + num(v);
  if (!(v >= s.lo && v <= s.hi)) return MakeError(flag + " is outside [" + num(s.lo) + ", " + num(s.hi) + "]");
  if (s.kind != ParamSpec::Kind::kReal && v != std::floor(v)) return MakeError(flag + " must be a whole number");
  if (s.kind == ParamSpec::Kind::kOdd && std::fmod(v, 2.0) == 0) return MakeError(flag + " must be odd");
  return {};
}

Status CheckPolicyName(const std::string& name) {
  if (FindPolicy(name)) return {};
  std::string known;
  for (const auto& p : Registry()) known += (known.empty() ? "" : ", ") + p.name;
  return MakeError("unknown KV policy '" + name + "' (known: " + known + ")");
}

Expected<std::unique_ptr<Policy>> MakePolicy(const std::string& name, const Params& given) {
  KVTRIM_RETURN_IF_ERROR(CheckPolicyName(name));
  const PolicyInfo* info = FindPolicy(name);
  Params full;
  for (const auto& s : info->params) full[s.name] = s.def;
  for (const auto& [k, v] : given) {
    auto spec = std::find_if(info->params.begin(), info->params.end(), [&k = k](const ParamSpec& s) { return s.name == k; });
    if (spec == info->params.end()) return MakeError("flag --" + k + " does not apply to policy '" + name + "'");
    KVTRIM_RETURN_IF_ERROR(CheckParam(*spec, v));
    full[k] = v;
  }
  return info->make(full);
}

}  // namespace kvtrim::kv
