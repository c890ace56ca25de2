// llama-bench's markdown table and JSON array for `kvtrim bench -o md|json`.
#pragma once
#include <string>
#include <vector>

#include "engine/bench_llama.h"

namespace kvtrim::cli {

struct LlamaBenchMeta {
  std::string model_filename, model_type, type_kv;
  uint64_t model_size = 0, model_n_params = 0;
  int n_threads = 0;
  std::string kernels;  // dispatch path of the int8 kernels
};

LlamaBenchMeta DescribeForBench(const Engine& e, const std::string& path, const std::string& kv_quant);
// Same columns as llama-bench -o md: model | size | params | backend | threads | test | t/s.
std::string LlamaBenchMarkdown(const LlamaBenchMeta& m, const std::vector<LlamaBenchTest>& tests);
// Same field names as llama-bench -o json (and n_depth, kernels).
std::string LlamaBenchJson(const LlamaBenchMeta& m, const std::vector<LlamaBenchTest>& tests);

}  // namespace kvtrim::cli
