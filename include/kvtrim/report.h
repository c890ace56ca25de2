// What a session's KV cache holds and what its compression did, and what the
// engine's weights take, as plain values: the CLI and the benches print them
// without reading the cache, the compressor or the weights themselves.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kvtrim/clock.h"

namespace kvtrim {

class Engine;
class Session;

struct KvReport {
  std::string policy;
  std::string quant;              // the storage type of kept entries
  double ratio = 1;               // the retention ratio of the last compression (Session::chosen_ratio)
  size_t bytes_used = 0;          // bytes the entries occupy (KvCache::BytesUsed)
  size_t bytes_full = 0;          // an exact full f32 cache of the same length
  size_t bytes_full_same_type = 0;  // ... with its rows in the entries' storage type (quant)
  size_t bytes_held = 0;          // allocated, slack included (KvCache::BytesHeld)
  size_t peak_bytes = 0;          // Session::peak_kv_bytes
  size_t entries = 0;             // entries held over every head
  int64_t logical_length = 0;     // tokens the cache has seen
  int64_t evictions = 0;
  double compress_seconds = 0;
  // Entries per KV head ([layer][head]) when the budgets are per head (a profile).
  bool per_head_budgets = false;
  std::vector<std::vector<int>> head_entries;
  // The policy's counters and the rates the registry derives from them.
  std::vector<std::pair<std::string, int64_t>> counters;
  std::vector<std::pair<std::string, double>> counter_rates;
};
KvReport DescribeKv(const Session& session);

struct WeightsReport {
  size_t file_bytes = 0;      // the weights as stored in the file
  size_t packed_bytes = 0;    // Q8_0/Q4_0 repacks read by every product
  size_t released_bytes = 0;  // the repacked matrices' file pages given back
};
WeightsReport DescribeWeights(const Engine& engine);
// "weights: N bytes in the file, N bytes of Q8_0/Q4_0 repacks (...), N bytes
// of the repacked matrices' file pages released" (no newline), as run and
// bench print it.
std::string FormatWeights(const WeightsReport& w);

// The kernel paths in use: the dispatched one ("avx512-vnni"), and the
// repacked products' where the model has Q8_0/Q4_0 repacks.
std::string KernelPathsLabel(const Engine& engine);

// Peak resident set size of this process so far (VmHWM), in bytes; 0 if unknown.
size_t PeakRssBytes();

// (FormatRate, the rates run and bench print: kvtrim/clock.h.)

}  // namespace kvtrim
