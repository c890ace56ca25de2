// The registered KV policies as plain descriptions (name, summary, their own
// flags, what they take), for listings and flag parsers that must not build
// or read a policy themselves.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kvtrim {

// A policy's own flag, as the policy declares it (one struct: the registry's
// and the listing's).
struct PolicyParam {
  std::string name;  // the flag: --name
  double def = 0;
  std::string help;
  double lo = 0, hi = 1e9;                 // accepted range
  std::vector<std::string> choices = {};   // a named choice: the name (or its index) gives the index
  bool is_flag = false;                    // a switch (given: 1)
  // The values it takes: whole numbers (the default: counts, positions,
  // switches, choices), any real in range, or odd whole numbers.
  enum class Kind { kInteger, kReal, kOdd };
  Kind kind = Kind::kInteger;
};

struct PolicyDescription {
  std::string name;
  std::string summary;
  std::vector<PolicyParam> params;
  bool adaptive = false;        // takes --head-budget adaptive (scores entries, leaves the allocation)
  bool prefill_time = true;     // compresses after the prompt's prefill
  std::string stream_blocker;   // why it cannot take --prefill-chunk (empty: it can)
  bool costly = false;          // left out of the default eval sweep
};

// Every registered policy, in the registry's stable order.
std::vector<PolicyDescription> DescribePolicies();

// The policy's counter rates in percent (e.g. kvslimmer's fallback rate),
// for counters summed by the caller; a rate whose denominator is 0 or
// absent is left out.
std::vector<std::pair<std::string, double>> PolicyCounterRates(
    const std::string& policy, const std::vector<std::pair<std::string, int64_t>>& counters);

}  // namespace kvtrim
