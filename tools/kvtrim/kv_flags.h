// The KV-cache flags shared by run, bench and eval: --kv, --kv-ratio,
// --kv-budget, --kv-quant and every policy's own flags, declared once from
// the policy registry.
#pragma once
#include <CLI/CLI.hpp>
#include <map>
#include <memory>
#include <string>

#include "kvtrim/options.h"
#include "kvtrim/status.h"

namespace kvtrim::cli {

struct KvFlags {
  std::string policy = "full";
  double ratio = 1.0;
  int budget = 0;
  std::string quant = "f32";
  std::string profile;
  bool head_budgets = false, no_head_budgets = false;  // --head-budgets / --no-head-budgets
  std::string head_budget = "uniform";  // --head-budget uniform|adaptive
  double min_head_share = 0.2;          // --min-head-share
  double quality = 0;        // --kv-quality TAU (0: off)
  std::string calibration;   // --calibration FILE
  bool check_finite = false;  // --check-finite
  std::map<std::string, double> params;          // values of the policy flags
  std::map<std::string, CLI::Option*> options;   // to tell which were given
  CLI::Option* ratio_opt = nullptr;
};

// with_quality adds --kv-quality TAU and --calibration FILE (run, bench).
void AddKvFlags(CLI::App* sub, KvFlags* f, bool with_policy = true, bool with_quality = false);
// The options for one policy: only flags given on the command line are passed
// (a flag of another policy is an error raised when the policy is built).
KvOptions ToKvOptions(const KvFlags& f, const std::string& policy);

}  // namespace kvtrim::cli
