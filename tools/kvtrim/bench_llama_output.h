// llama-bench's markdown table and JSON array for `kvtrim bench -o md|json`.
#pragma once
#include <string>
#include <vector>

#include "kvtrim/bench_llama.h"

namespace kvtrim::cli {

// Same columns as llama-bench -o md: model | size | params | backend | threads | test | t/s.
std::string LlamaBenchMarkdown(const LlamaBenchMeta& m, const std::vector<LlamaBenchTest>& tests);
// Same field names as llama-bench -o json (and n_depth, kernels).
std::string LlamaBenchJson(const LlamaBenchMeta& m, const std::vector<LlamaBenchTest>& tests);

}  // namespace kvtrim::cli
