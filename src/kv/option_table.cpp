#include "kvtrim/option_table.h"

#include <cmath>
#include <iomanip>
#include <sstream>

#include "kv/compressor.h"
#include "kv/policy.h"

namespace kvtrim {

using namespace kv;  // NOLINT: the policies and KV types the table checks against

namespace {

Status CheckPolicy(const KvOptions& o) { return CheckPolicyName(o.policy); }

Status CheckKvQuant(const KvOptions& o) {
  auto q = ParseKvQuant(o.quant);
  if (!q.ok()) return q.error();
  return {};
}

// A table row that a server request may set too, through the field `request`.
KvOptionSpec PerRequest(KvOptionSpec s, std::string request, Status (*check)(const KvOptions&) = nullptr) {
  s.request = std::move(request);
  s.check = check;
  return s;
}

}  // namespace

const std::vector<KvOptionSpec>& KvOptionTable() {
  using S = KvOptionSpec::Scope;
  constexpr double kAny = std::numeric_limits<double>::infinity();
  static const std::vector<KvOptionSpec> t = {
      PerRequest({"kv", "KV policy (see `kvtrim policies`)", &KvOptions::policy, S::kPolicy}, "kv", CheckPolicy),
      // The CLI's range check takes 0 too: ratio 0 is refused where the
      // options are used (and by the server, from lo_open).
      PerRequest({"kv-ratio", "Retention ratio in (0, 1]", &KvOptions::ratio, S::kAll, 0.0, 1.0, {}, false, true},
                 "kv_ratio"),
      PerRequest({"kv-budget", "Per-head token budget (overrides --kv-ratio)", &KvOptions::budget_tokens, S::kAll, 1,
                  2147483647},
                 "kv_budget"),
      // The type is checked where it is parsed (ParseKvQuant), for every caller alike.
      PerRequest({"kv-quant", "Storage of the entries: f32, f16, q8_0, q4_0", &KvOptions::quant, S::kAll, -kAny, kAny,
                  {}, false, false, {}, nullptr, "f16 (run, bench, serve); f32 (eval, calibrate, the library)"},
                 "kv_quant", CheckKvQuant),
      PerRequest({"kv-quant-at",
                  "When entries take the --kv-quant type: write (from the prefill's first batch on, so the peak "
                  "follows the type; a batch's own keys and values are attended in f32 while it is computed) or "
                  "kept (computed and compressed in f32, then what is kept is quantized: METHODS.md section 6)",
                  &KvOptions::quant_at, S::kAll, -kAny, kAny, {"write", "kept"}, false, false, {}, nullptr,
                  "write; eval: kept"},
                 "kv_quant_at"),
      PerRequest({"kv-rotate",
                  "Store keys and values rotated (a randomized Walsh-Hadamard transform; queries rotated to match, "
                  "outputs rotated back, so attention is unchanged in exact arithmetic): auto (q8_0 and q4_0, whose "
                  "per-block scales an outlier channel would set), on (every type), off",
                  &KvOptions::rotate, S::kAll, -kAny, kAny, {"auto", "on", "off"}},
                 "kv_rotate"),
      {"profile", "Model profile file from `kvtrim profile` (razor; default: profile in-process)",
       &KvOptions::profile},
      PerRequest({"head-budget",
                  "How a layer's budget is shared by its KV heads: uniform, or adaptive (AdaKV: one top-k over the "
                  "layer's per-head-normalised entry scores; policies that score entries)",
                  &KvOptions::head_budget, S::kAll, -kAny, kAny, {"uniform", "adaptive"}},
                 "kv_head_budget"),
      PerRequest(
          {"min-head-share", "--head-budget adaptive: every head keeps at least this share of the uniform per-head budget",
           &KvOptions::min_head_share, S::kAll, 0.0, 1.0},
          "kv_min_head_share"),
      PerRequest({"kv-threshold",
                  "Threshold eviction: keep the entries whose normalised score exceeds T times their head's mean "
                  "(1: those above average) and those the policy protects, after the prefill and at every decode "
                  "step; the total follows the context instead of --kv-ratio (policies that score entries; 0: off)",
                  &KvOptions::threshold, S::kAll, 0.0, 1e6},
                 "kv_threshold"),
      {"kv-quality",
       "Quality target TAU in (0, 1]: the retention ratio is chosen per context from --calibration (overrides "
       "--kv-ratio)",
       &KvOptions::quality, S::kQuality, 0.0, 1.0},
      {"calibration", "Calibration file written by `kvtrim calibrate`", &KvOptions::calibration, S::kQuality},
      PerRequest({"prefill-chunk",
                  "Prefill the prompt N tokens at a time and bring every head back within its budget after each "
                  "chunk, so the peak follows the budget (no head holds more than budget + N entries); 0: the "
                  "whole prompt, then compression. Policies that cannot stream say so in `kvtrim policies`",
                  &KvOptions::prefill_chunk, S::kAll, 0, 2147483647},
                 "prefill_chunk"),
      PerRequest({"bf16-attention",
                  "Prefill attention's tile products (Q K^T, P V) in bf16 with f32 sums where the CPU has "
                  "AVX512-BF16 (else f32): pass (only the reference computations of am, kvzip and kvzip-am, whose "
                  "scores rank entries: the reference pass and am's fit scores), all (the prefill too), off (f32 "
                  "everywhere); decode stays f32",
                  &KvOptions::bf16_attention, S::kAll, -kAny, kAny, {"pass", "all", "off"}},
                 "bf16_attention"),
      {"check-finite",
       "Verify the cache after every compression (finite keys/values, no NaN log-weight) and name the policy that "
       "broke it (always on in debug builds)",
       &KvOptions::check_finite, S::kAll, -kAny, kAny, {}, true},
  };
  return t;
}

std::string KvOptionValue(const KvOptionSpec& s, const KvOptions& o) {
  std::ostringstream os;
  std::visit([&](auto field) { os << o.*field; }, s.field);
  return os.str();
}

std::string KvOptionDefault(const KvOptionSpec& s) { return KvOptionValue(s, KvOptions{}); }

std::string KvOptionsFingerprint(const KvOptions& o) {
  std::string f;
  for (const KvOptionSpec& s : KvOptionTable()) f += s.name + "=" + KvOptionValue(s, o) + ";";
  return f;
}

std::string KvOptionsMarkdown() {
  std::ostringstream os;
  os << "# KV flags\n\n"
        "Generated from the option table (`src/kv/option_table.cpp`) by `kvtrim policies --options`;\n"
        "`tests/option_table_test.cpp` keeps this file equal to it. The policies' own flags are listed by\n"
        "`kvtrim policies`. `--head-budgets` / `--no-head-budgets` (profile head budgets on / off; by\n"
        "default on for policies that take them, `am`) follow `--profile`.\n\n"
        "`request field`: the field of a server request (`POST /v1/completions`, `/v1/chat/completions`,\n"
        "`/v1/contexts`) that sets the option for that request (docs/server.md).\n\n"
        "| flag | default | accepted | where | request field | meaning |\n|---|---|---|---|---|---|\n";
  for (const KvOptionSpec& s : KvOptionTable()) {
    std::string accepted;
    for (const std::string& c : s.choices) accepted += (accepted.empty() ? "" : ", ") + c;
    if (std::isfinite(s.lo) || std::isfinite(s.hi)) {
      std::ostringstream r;
      r << std::setprecision(12) << (s.lo_open ? "(" : "[") << s.lo << ", " << s.hi << "]";
      accepted = r.str();
    }
    const char* where = s.scope == KvOptionSpec::Scope::kPolicy    ? "run, bench, serve"
                        : s.scope == KvOptionSpec::Scope::kQuality ? "run, bench, eval"
                                                                   : "every command with KV flags";
    std::string def = s.is_flag ? "off" : !s.defaults.empty() ? s.defaults : KvOptionDefault(s);
    if (def.empty()) def = "(none)";
    const std::string request = s.request.empty() ? "-" : "`" + s.request + "`";
    os << "| `--" << s.name << "` | " << def << " | " << (accepted.empty() ? "any" : accepted) << " | " << where
       << " | " << request << " | " << s.help << " |\n";
  }
  return os.str();
}

}  // namespace kvtrim
