// The KV options (kvtrim/options.h: KvOptions) declared once: name,
// help, the field it sets, its accepted range or values, and where it
// applies. The CLI's KV flags (tools/kvtrim/kv_flags.cpp) and the flag list
// of `kvtrim policies --options` (and so docs/flags-kv.md), the server's
// request fields (src/server/request.cpp) and the eval's fingerprint are
// generated from it; the defaults are KvOptions' own (src/kv/option_table.cpp). The policies' own flags come from the
// policy registry (ParamSpec), the per-head-budget switches
// (--head-budgets / --no-head-budgets: one tri-state field) stay by hand.
#pragma once
#include <limits>
#include <string>
#include <variant>
#include <vector>

#include "kvtrim/options.h"
#include "kvtrim/status.h"

namespace kvtrim {

struct KvOptionSpec {
  enum class Scope {
    kAll,        // every command with KV flags
    kPolicy,     // commands that pick the policy (not eval, calibrate: they sweep methods)
    kQuality,    // commands that choose the ratio per context (run, bench, eval)
  };
  std::string name;  // --name
  std::string help;
  std::variant<std::string KvOptions::*, double KvOptions::*, int KvOptions::*, bool KvOptions::*> field;
  Scope scope = Scope::kAll;
  double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
  std::vector<std::string> choices = {};  // a string field's accepted values (empty: any)
  bool is_flag = false;                   // a switch (bool field)
  bool lo_open = false;                   // lo itself is out of range: (lo, hi]
  // The field of a server request that sets it ("kv_ratio"; empty: not per request).
  std::string request = {};
  // Checks a value the range and choices cannot express (a registered
  // policy, a KV type); null: none. The server runs it on request fields.
  Status (*check)(const KvOptions&) = nullptr;
  // The defaults when the commands' differ from KvOptions' (the docs' default
  // column; the CLI shows each command's own); empty: KvOptions' default.
  std::string defaults = {};
};

const std::vector<KvOptionSpec>& KvOptionTable();

// An option's value in `o` as text; KvOptionDefault: in a default KvOptions.
std::string KvOptionValue(const KvOptionSpec& s, const KvOptions& o);
std::string KvOptionDefault(const KvOptionSpec& s);

// Every option of the table as "name=value;" (the eval's fingerprint).
std::string KvOptionsFingerprint(const KvOptions& o);

// The table as Markdown (docs/flags-kv.md is this text; a test keeps them equal).
std::string KvOptionsMarkdown();

}  // namespace kvtrim
