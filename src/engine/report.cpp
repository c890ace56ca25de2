// Reports of a session's KV and the engine's weights (include/kvtrim/report.h).
#include "engine/engine_impl.h"
#include "kvtrim/report.h"

#include <cstdio>

#include "kvtrim/clock.h"
#include "kernels/cpu.h"
#include "kernels/qgemm_packed.h"
#include "kv/cache.h"
#include "kv/compressor.h"
#include "kv/policy.h"
#include "kvtrim/engine.h"
#include "model/weights.h"

namespace kvtrim {

KvReport DescribeKv(const Session& s) {
  const kv::KvCache& cache = s.impl().cache();
  const kv::Compressor& comp = s.impl().compressor();
  KvReport r;
  r.policy = comp.options().policy;
  r.quant = comp.options().quant;
  r.ratio = s.chosen_ratio();
  r.bytes_used = cache.BytesUsed();
  r.bytes_full = cache.BytesFull();
  auto type = kv::ParseKvQuant(r.quant);
  r.bytes_full_same_type = type.ok() ? cache.BytesFull(type.value()) : r.bytes_full;
  r.bytes_held = cache.BytesHeld();
  r.peak_bytes = s.peak_kv_bytes();
  r.entries = cache.EntriesHeld();
  r.logical_length = cache.logical_length();
  r.evictions = comp.evictions();
  r.compress_seconds = comp.compress_seconds();
  r.per_head_budgets = comp.head_budgets();
  if (r.per_head_budgets)
    for (int l = 0; l < cache.n_layer(); ++l) {
      r.head_entries.emplace_back();
      for (int h = 0; h < cache.n_head_kv(); ++h) r.head_entries.back().push_back(cache.head(l, h).size());
    }
  r.counters = comp.counters();
  r.counter_rates = kv::CounterRates(r.policy, r.counters);
  return r;
}

WeightsReport DescribeWeights(const Engine& e) {
  return {e.impl().weights().total_bytes, e.impl().weights().packed_bytes, e.impl().weights().released_bytes};
}

std::string FormatWeights(const WeightsReport& w) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "weights: %zu bytes in the file, %zu bytes of Q8_0/Q4_0 repacks (read by every product), "
                "%zu bytes of the repacked matrices' file pages released",
                w.file_bytes, w.packed_bytes, w.released_bytes);
  return buf;
}

std::string KernelPathsLabel(const Engine& e) {
  std::string s = kernels::KernelPathName(kernels::ActiveKernelPath());
  if (e.impl().weights().packed_bytes > 0)  // Q8_0/Q4_0 products on the repack (qgemm_packed.h)
    s += std::string(", repacked ") + kernels::KernelPathName(kernels::PackedKernelPath());
  return s;
}


}  // namespace kvtrim
