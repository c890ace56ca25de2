// The KV-cache flags shared by run, bench, eval, serve and calibrate,
// generated from the library's option table (kv/option_table.h: --kv,
// --kv-ratio, --kv-budget, --kv-quant, ...) and the policy registry (every
// policy's own flags). Their values land in a KvOptions whose defaults are
// the only ones.
#pragma once
#include <CLI/CLI.hpp>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kvtrim/options.h"
#include "kvtrim/status.h"

namespace kvtrim::cli {

struct KvFlags {
  KvOptions kv;                                  // the table's options land here
  bool head_budgets = false, no_head_budgets = false;  // --head-budgets / --no-head-budgets (kv.head_budgets)
  std::map<std::string, double> params;          // values of the policy flags
  std::map<std::string, CLI::Option*> options;   // to tell which were given
  CLI::Option* ratio_opt = nullptr;
  CLI::Option* policy_opt = nullptr;             // --kv
  CLI::Option* quant_opt = nullptr;              // --kv-quant
  std::vector<CLI::Option*> all;                 // every KV flag, to tell whether any was given
  // llama.cpp's --cache-type-k / --cache-type-v (-ctk / -ctv): one type here (ApplyCacheTypes).
  std::string cache_type_k, cache_type_v;
  // Shorthands the commands print.
  const std::string& policy() const { return kv.policy; }
  bool any_given() const;
};

// Defaults that differ by command, set before AddKvFlags: run, bench and
// serve store f16 entries from the first token (llama.cpp's default KV
// type); eval keeps f32 and METHODS.md section 6's order (compress, then
// quantize what is kept) as its reference; calibrate keeps KvOptions'.
void UseServingDefaults(KvFlags* f);
void UseReferenceDefaults(KvFlags* f);

// with_policy adds --kv (commands that pick the policy); with_quality adds
// --kv-quality TAU and --calibration FILE (run, bench, eval).
void AddKvFlags(CLI::App* sub, KvFlags* f, bool with_policy = true, bool with_quality = false);
// --cache-type-k / --cache-type-v (run, bench, serve): llama.cpp's spellings
// of --kv-quant. K and V are stored in one type, so the two must agree (with
// each other, and with --kv-quant when it is given too); then kv.quant is it.
void AddCacheTypeFlags(CLI::App* sub, KvFlags* f);
Status ApplyCacheTypes(KvFlags* f);

// What the KV flags given ask for that will not happen, as warnings: a
// budget for the full cache (no --kv), ... (empty: none).
std::vector<std::string> KvFlagWarnings(const KvFlags& f);

// The options for one policy: only flags given on the command line are passed
// (a flag of another policy is an error raised when the policy is built).
KvOptions ToKvOptions(const KvFlags& f, const std::string& policy);

}  // namespace kvtrim::cli
