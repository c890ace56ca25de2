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

#include "kvtrim/options.h"
#include "kvtrim/status.h"

namespace kvtrim::cli {

struct KvFlags {
  KvOptions kv;                                  // the table's options land here
  bool head_budgets = false, no_head_budgets = false;  // --head-budgets / --no-head-budgets (kv.head_budgets)
  std::map<std::string, double> params;          // values of the policy flags
  std::map<std::string, CLI::Option*> options;   // to tell which were given
  CLI::Option* ratio_opt = nullptr;
  // Shorthands the commands print.
  const std::string& policy() const { return kv.policy; }
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
// The options for one policy: only flags given on the command line are passed
// (a flag of another policy is an error raised when the policy is built).
KvOptions ToKvOptions(const KvFlags& f, const std::string& policy);

}  // namespace kvtrim::cli
