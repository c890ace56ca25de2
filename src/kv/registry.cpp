#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>

#include "kv/policy.h"

namespace kvtrim::kv {

// The built-in policies, one line each (registration order is listing order):
// X(Name) declares NamePolicyInfo(), defined in policies/<name>.cpp.
#define KVTRIM_BUILTIN_POLICIES(X)                                                                          \
  X(Full) X(Window) X(Random) X(Lru) X(H2o) X(Scissorhands) X(Snapkv) X(Pyramidkv) X(Kvslimmer) X(MergeMean) \
  X(Razor) X(Compactor) X(Am) X(Tova) X(Knorm) X(Keydiff) X(Kvzip) X(KvzipPlus) X(KvzipAm) X(ExpectedAttention)
#define KVTRIM_DECLARE_POLICY(Name) PolicyInfo Name##PolicyInfo();
KVTRIM_BUILTIN_POLICIES(KVTRIM_DECLARE_POLICY)
#undef KVTRIM_DECLARE_POLICY

namespace {

struct Policies {
  std::mutex mu;  // registrations; readers hold references (a deque keeps them)
  std::deque<PolicyInfo> all;
};

Status Add(Policies& r, PolicyInfo info) {
  if (info.name.empty()) return MakeError("a policy needs a name");
  if (!info.make) return MakeError("policy '" + info.name + "' has no factory");
  for (const PolicyInfo& p : r.all)
    if (p.name == info.name) return MakeError("policy '" + info.name + "' is registered already");
  for (const TapInfo& t : info.taps)
    if (!FindTap(t.name)) KVTRIM_RETURN_IF_ERROR(RegisterTap(t));
  r.all.push_back(std::move(info));
  return {};
}

Policies& Built() {
  static Policies r;
  static const bool built = [] {
#define KVTRIM_ADD_POLICY(Name) (void)Add(r, Name##PolicyInfo());
    KVTRIM_BUILTIN_POLICIES(KVTRIM_ADD_POLICY)
#undef KVTRIM_ADD_POLICY
    return true;
  }();
  (void)built;
  return r;
}

}  // namespace

const std::deque<PolicyInfo>& Registry() { return Built().all; }

Status RegisterPolicy(PolicyInfo info) {
  Policies& r = Built();
  std::lock_guard<std::mutex> lock(r.mu);
  return Add(r, std::move(info));
}

std::string StreamBlocker(const PolicyTraits& t) {
  if (t.stream_blocker) return *t.stream_blocker;
  if (t.reference_pass.repeat)
    return "it scores entries with a reference pass over the whole context, which a prefill in chunks has not "
           "seen when it compresses";
  if (t.budget.kind == budget::Kind::kShared) return "its one budget shared by every head needs every entry scored at once";
  return {};
}

bool TakesAdaptiveBudgets(const PolicyTraits& t) {
  return t.scores_entries && t.budget.kind != budget::Kind::kShared && t.budget.kind != budget::Kind::kCastes;
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
  Params defaults;
  for (const ParamSpec& p : info->params) defaults[p.name] = p.def;
  for (const CounterRate& r : TraitsOf(*info, defaults).rates) {
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

Expected<Params> CompleteParams(const PolicyInfo& info, const Params& given) {
  Params full;
  for (const auto& s : info.params) full[s.name] = s.def;
  for (const auto& [k, v] : given) {
    auto spec = std::find_if(info.params.begin(), info.params.end(), [&k = k](const ParamSpec& s) { return s.name == k; });
    if (spec == info.params.end()) return MakeError("flag --" + k + " does not apply to policy '" + info.name + "'");
    KVTRIM_RETURN_IF_ERROR(CheckParam(*spec, v));
    full[k] = v;
  }
  return full;
}

PolicyTraits TraitsOf(const PolicyInfo& info, const Params& complete) {
  return info.traits ? info.traits(complete) : PolicyTraits{};
}

Expected<PolicyTraits> TraitsFor(const std::string& name, const Params& given) {
  KVTRIM_RETURN_IF_ERROR(CheckPolicyName(name));
  const PolicyInfo& info = *FindPolicy(name);
  auto full = CompleteParams(info, given);
  if (!full.ok()) return full.error();
  return TraitsOf(info, full.value());
}

Expected<std::unique_ptr<Policy>> MakePolicy(const std::string& name, const Params& given) {
  KVTRIM_RETURN_IF_ERROR(CheckPolicyName(name));
  const PolicyInfo& info = *FindPolicy(name);
  auto full = CompleteParams(info, given);
  if (!full.ok()) return full.error();
  std::unique_ptr<Policy> p = info.make(full.value());
  p->traits_ = TraitsOf(info, full.value());
  return p;
}

}  // namespace kvtrim::kv
