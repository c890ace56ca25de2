// libFuzzer target: policy plans against a cache head. The input builds a
// random head (storage type, dimension, entries with nondecreasing positions,
// log-weights including -inf and values whose exp underflows) and a random
// plan (keep lists out of order or out of range, merges reusing entries, key
// weights of the wrong count or non-finite, synthetic entries of the wrong
// dimension, overrides). An independent statement of the rules decides
// whether the plan is valid; ValidatePlan must agree: every invalid plan
// refused. A valid one is applied and must leave a consistent head: the
// expected number of entries, positions in order, every original entry
// accounted for once, kept rows untouched, and (inputs being finite and
// bounded) finite keys and values and no NaN log-weight (kv::CheckHead).
#include <fuzzer/FuzzedDataProvider.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <set>
#include <vector>

#include "kv/cache.h"
#include "kv/check.h"
#include "kv/compressor.h"
#include "kv/plan.h"

namespace {

using kvtrim::GgmlType;
using kvtrim::kv::Plan;

constexpr float kInf = std::numeric_limits<float>::infinity();

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "fuzz_plan: %s\n", what);
  std::abort();
}

float SmallValue(FuzzedDataProvider& in) { return static_cast<float>(in.ConsumeIntegral<int8_t>()) / 8.f; }

// A log-weight: 0, small, -inf (zero cardinality), -1e4 (exp underflows), or large.
float LogWeight(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange(0, 4)) {
    case 0: return 0.f;
    case 1: return static_cast<float>(in.ConsumeIntegral<int8_t>()) / 4.f;
    case 2: return -kInf;
    case 3: return -1e4f;
    default: return 80.f;
  }
}

// A number a plan carries: mostly small and finite, sometimes NaN or +-inf.
float PlanNumber(FuzzedDataProvider& in, bool* finite) {
  switch (in.ConsumeIntegralInRange(0, 15)) {
    case 0: *finite = false; return std::numeric_limits<float>::quiet_NaN();
    case 1: *finite = false; return kInf;
    case 2: *finite = false; return -kInf;
    default: return SmallValue(in);
  }
}

std::vector<float> Row(FuzzedDataProvider& in, int d, bool* finite) {
  int len = d;
  if (in.ConsumeIntegralInRange(0, 15) == 0) len = d + in.ConsumeIntegralInRange(-1, 1);
  std::vector<float> r(std::max(0, len));
  bool f = true;
  for (float& x : r) x = PlanNumber(in, &f);
  if (!f) *finite = false;
  return r;
}

int Index(FuzzedDataProvider& in, int n) { return in.ConsumeIntegralInRange(-1, n); }

bool ValidLogw(float b) { return !std::isnan(b) && b != kInf; }

// The plan rules (kv/plan.h, METHODS.md section 0), stated independently.
bool Valid(const Plan& p, int n, int d) {
  std::vector<char> used(n, 0);
  auto in_range = [n](int i) { return i >= 0 && i < n; };
  for (size_t k = 0; k < p.keep.size(); ++k) {
    if (!in_range(p.keep[k]) || (k > 0 && p.keep[k] <= p.keep[k - 1])) return false;
    used[p.keep[k]] = 1;
  }
  for (const auto& m : p.merge) {
    if (m.sources.empty()) return false;
    if (!m.key_weights.empty() && m.key_weights.size() != m.sources.size()) return false;
    for (float w : m.key_weights)
      if (!std::isfinite(w)) return false;
    for (int i : m.sources) {
      if (!in_range(i) || used[i]) return false;
      used[i] = 1;
    }
  }
  auto finite_row = [d](const std::vector<float>& r) {
    if (static_cast<int>(r.size()) != d) return false;
    for (float x : r)
      if (!std::isfinite(x)) return false;
    return true;
  };
  for (const auto& e : p.add)
    if (!finite_row(e.k) || !finite_row(e.v) || !ValidLogw(e.logw)) return false;
  for (const auto& [i, b] : p.set_logw)
    if (!in_range(i) || !ValidLogw(b)) return false;
  for (const auto& [i, r] : p.set_value)
    if (!in_range(i) || !finite_row(r)) return false;
  for (const auto& [i, r] : p.set_key)
    if (!in_range(i) || !finite_row(r)) return false;
  return true;
}

Plan MakePlan(FuzzedDataProvider& in, int n, int d) {
  Plan p;
  p.noop = false;
  bool finite = true;  // unused here: validity is decided by Valid()
  for (int i = 0; i < n; ++i)
    if (in.ConsumeBool()) p.keep.push_back(i);
  if (!p.keep.empty() && in.ConsumeIntegralInRange(0, 15) == 0) {  // break the order or the range
    const size_t a = in.ConsumeIntegralInRange<size_t>(0, p.keep.size() - 1);
    p.keep[a] = Index(in, n);
  }
  const int n_merge = in.ConsumeIntegralInRange(0, 3);
  for (int m = 0; m < n_merge; ++m) {
    kvtrim::kv::MergeEntry e;
    const int k = in.ConsumeIntegralInRange(0, 4);
    for (int s = 0; s < k; ++s) e.sources.push_back(Index(in, n));
    if (in.ConsumeBool()) {
      int kw = static_cast<int>(e.sources.size());
      if (in.ConsumeIntegralInRange(0, 15) == 0) kw += 1;
      for (int s = 0; s < kw; ++s) e.key_weights.push_back(PlanNumber(in, &finite));
    }
    p.merge.push_back(std::move(e));
  }
  const int n_add = in.ConsumeIntegralInRange(0, 2);
  for (int a = 0; a < n_add; ++a) {
    kvtrim::kv::SyntheticEntry e;
    e.k = Row(in, d, &finite);
    e.v = Row(in, d, &finite);
    e.pos = in.ConsumeIntegralInRange(-2, n + 2);
    e.logw = in.ConsumeIntegralInRange(0, 15) == 0 ? std::numeric_limits<float>::quiet_NaN() : LogWeight(in);
    p.add.push_back(std::move(e));
  }
  for (int s = in.ConsumeIntegralInRange(0, 2); s > 0; --s)
    p.set_logw.emplace_back(Index(in, n), in.ConsumeIntegralInRange(0, 15) == 0 ? kInf : LogWeight(in));
  for (int s = in.ConsumeIntegralInRange(0, 1); s > 0; --s) p.set_value.emplace_back(Index(in, n), Row(in, d, &finite));
  for (int s = in.ConsumeIntegralInRange(0, 1); s > 0; --s) p.set_key.emplace_back(Index(in, n), Row(in, d, &finite));
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const GgmlType types[] = {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0};
  const GgmlType type = types[in.ConsumeIntegralInRange(0, 3)];
  const int d = type == GgmlType::F32 || type == GgmlType::F16 ? in.ConsumeIntegralInRange(1, 12) : 32;
  const int n = in.ConsumeIntegralInRange(0, 24);
  kvtrim::kv::HeadStore hs(d, type);
  std::vector<float> k(d), v(d);
  int32_t pos = in.ConsumeIntegralInRange(0, 4);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < d; ++j) k[j] = SmallValue(in), v[j] = SmallValue(in);
    hs.Append(k.data(), v.data(), pos, LogWeight(in));
    pos += in.ConsumeIntegralInRange(0, 3);
  }
  const Plan plan = MakePlan(in, n, d);
  const bool valid = Valid(plan, n, d);
  const kvtrim::Status st = kvtrim::kv::ValidatePlan(plan, n, d);
  if (st.ok() != valid) Fail(valid ? "ValidatePlan refused a valid plan" : "ValidatePlan accepted an invalid plan");
  if (!valid) return 0;

  const kvtrim::kv::HeadStore before = hs;
  const auto from = hs.Apply(plan);
  const size_t expect = plan.keep.size() + plan.merge.size() + plan.add.size();
  if (static_cast<size_t>(hs.size()) != expect) Fail("wrong number of entries after the plan");
  if (!kvtrim::kv::CheckHead(hs).ok()) Fail(kvtrim::kv::CheckHead(hs).message().c_str());
  for (int i = 1; i < hs.size(); ++i)
    if (hs.pos(i) < hs.pos(i - 1)) Fail("positions out of order after the plan");
  std::set<int> overwritten;
  for (const auto& [i, r] : plan.set_key) overwritten.insert(i);
  for (const auto& [i, r] : plan.set_value) overwritten.insert(i);
  std::set<int> overwritten_logw;
  for (const auto& [i, b] : plan.set_logw) overwritten_logw.insert(i);
  const size_t rb = hs.row_bytes();
  auto same_row = [&](int out, int in_i) {
    return std::memcmp(hs.key_row(out), before.key_row(in_i), rb) == 0 &&
           std::memcmp(hs.value_row(out), before.value_row(in_i), rb) == 0 && hs.pos(out) == before.pos(in_i) &&
           (overwritten_logw.count(in_i) || hs.logw(out) == before.logw(in_i));
  };
  if (from.empty()) {  // keep-only: compacted in place, in order
    if (!plan.merge.empty() || !plan.add.empty()) Fail("a merging plan returned no provenance");
    for (size_t a = 0; a < plan.keep.size(); ++a)
      if (!overwritten.count(plan.keep[a]) && !same_row(static_cast<int>(a), plan.keep[a])) Fail("a kept row changed");
    return 0;
  }
  if (from.size() != expect) Fail("provenance of the wrong length");
  std::multiset<int> seen;
  const std::set<int> kept(plan.keep.begin(), plan.keep.end());
  for (size_t j = 0; j < from.size(); ++j) {
    for (int i : from[j]) seen.insert(i);
    if (from[j].size() == 1 && kept.count(from[j][0]) && !overwritten.count(from[j][0]) &&
        !same_row(static_cast<int>(j), from[j][0]))
      Fail("a kept row changed");
  }
  std::multiset<int> want(plan.keep.begin(), plan.keep.end());
  for (const auto& m : plan.merge) want.insert(m.sources.begin(), m.sources.end());
  if (seen != want) Fail("provenance does not account for every kept or merged entry once");
  return 0;
}
