// The sampling flags of `kvtrim run` (--temp, --top-k, --top-p, --min-p,
// --repeat-penalty, --repeat-last-n, --seed), generated from the library's
// sampling table (kvtrim/sampling.h): the server's request fields come from
// the same rows.
#pragma once
#include <CLI/CLI.hpp>

#include "kvtrim/options.h"

namespace kvtrim::cli {

void AddSamplingFlags(CLI::App* sub, SamplingOptions* s);

}  // namespace kvtrim::cli
