// What llama-bench prints about the model (kvtrim/bench_llama.h).
#include <cstdio>
#include <map>

#include "engine/engine_impl.h"
#include "io/gguf.h"
#include "kvtrim/bench_llama.h"
#include "kvtrim/report.h"
#include "model/config.h"

namespace kvtrim {

LlamaBenchMeta DescribeForBench(const Engine& e, const std::string& path, const std::string& kv_quant) {
  LlamaBenchMeta m;
  m.model_filename = path;
  std::map<std::string, uint64_t> by_type;  // the weight type holding most parameters names the file
  for (const auto& t : e.impl().file().tensors()) {
    m.model_size += t.n_bytes;
    m.model_n_params += t.n_elements;
    if (t.shape.size() >= 2) by_type[TypeName(t.type)] += t.n_elements;
  }
  std::string main_type = "?";
  uint64_t best = 0;
  for (const auto& [name, n] : by_type)
    if (n > best) best = n, main_type = name;
  char params[32];
  std::snprintf(params, sizeof params, "%.1fM", m.model_n_params / 1e6);
  m.model_type = e.impl().config().arch + " " + params + " " + main_type;
  m.n_threads = e.threads();
  m.type_kv = kv_quant;
  m.kernels = KernelPathsLabel(e);
  return m;
}

}  // namespace kvtrim
