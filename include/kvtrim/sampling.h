// The sampling options (kvtrim/options.h: SamplingOptions) declared once:
// the flag of `kvtrim run`, the field of a server request, the accepted
// range, the help. The run command's flags, the server's request parsing
// (src/server/request.cpp) and docs/request-fields.md come from it; the
// defaults are SamplingOptions' own.
#pragma once
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "kvtrim/options.h"

namespace kvtrim {

struct SamplingOptionSpec {
  std::string flag;     // --flag of `kvtrim run`
  std::string request;  // field of a completion request
  std::string help;
  std::variant<float SamplingOptions::*, int SamplingOptions::*, uint64_t SamplingOptions::*> field;
  double lo = 0, hi = 0;
  bool lo_open = false;   // lo itself is out of range: (lo, hi]
  std::string llama_cpp;  // llama.cpp's default where it differs (docs); empty: the same
  bool integer() const { return !std::holds_alternative<float SamplingOptions::*>(field); }
  // The range's ends as whole numbers (hi clamped to INT64_MAX, which a double cannot hold).
  int64_t int_lo() const { return static_cast<int64_t>(lo); }
  int64_t int_hi() const { return hi >= 9.2e18 ? INT64_MAX : static_cast<int64_t>(hi); }
};

const std::vector<SamplingOptionSpec>& SamplingOptionTable();

// The option's value in `o` as text ("0.8", "40"); the range as "[0, 1]".
std::string SamplingOptionValue(const SamplingOptionSpec& s, const SamplingOptions& o);
std::string SamplingOptionRange(const SamplingOptionSpec& s);

}  // namespace kvtrim
