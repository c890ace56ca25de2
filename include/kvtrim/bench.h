// Throughput measurement behind `kvtrim bench`: prefill and decode tokens/s at
// given context depths (like llama-bench -d), with the bytes read per decoded
// token, and a memory-bandwidth probe to compare against.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "kvtrim/bench_repeat.h"
#include "kvtrim/clock.h"
#include "kvtrim/engine.h"
#include "kvtrim/report.h"

namespace kvtrim {

struct BenchOptions {
  std::vector<int> depths = {0, 256, 1024};
  int gen = 32;    // decode steps timed at each depth
  int reps = 3;
  int prefill_tokens = 0;  // prompt length timed at depth 0 (0: 128)
  uint64_t seed = 1;
  double warmup_s = 0.5;   // untimed warm-up before the first depth
  SessionOptions session;
  std::function<void(const std::string&)> progress;  // may be empty
  // The clock (null: SteadyClock()); each repetition runs its prefill
  // and decode again until both span limits.min_steps clock steps.
  const Clock* clock = nullptr;
  RepeatLimits limits;
  // > 0: probe the read bandwidth over a buffer of this many bytes just
  // before and just after every repetition's timed decode steps
  // (BenchRow::mem_read_gb_s), outside the timed spans.
  size_t membw_bytes = 0;
};

struct Stat {
  double mean = 0, sd = 0;
};

struct BenchRow {
  int depth = 0;
  int prefill_len = 0;   // tokens in the timed prefill
  Stat prefill_tok_s;
  Stat decode_tok_s;
  size_t kv_bytes = 0;       // held after the decode steps
  size_t kv_bytes_peak = 0;  // the most held at once (Session::peak_kv_bytes)
  size_t kv_bytes_full = 0;  // a full cache of the same length
  double weight_bytes_per_tok = 0;  // read by a decode step: repacked matrices' repacks, others as stored
  double kv_bytes_per_tok = 0;  // K and V rows read per decode step (mean)
  double gb_s = 0;              // (weights + KV) bytes per step / step time
  // With BenchOptions::membw_bytes: the read-bandwidth probes beside this
  // row's timed decode steps (one before and one after each repetition's,
  // mean and sd, GB/s) and gb_s as a share of their mean; 0 without.
  Stat mem_read_gb_s;
  double bw_share = 0;
  // Multiply-adds of the prefill per token, a multiply and an add counting
  // two (PrefillFlopsPerToken): the full cache's causal prefill of
  // prefill_len tokens; a compressed chunked prefill does fewer.
  double prefill_flops_per_tok = 0;
  double compress_ms = 0;       // prefill-time compression (mean), between chunks included
  // With KvOptions::prefill_chunk: the part of compress_ms spent between
  // chunks, inside the timed prefill (prefill_tok_s counts it; the forward
  // passes alone took the prefill's time minus this). 0 without chunks.
  double prefill_compress_ms = 0;
  // The first decode step after the prefill, not timed with the others: it
  // grows every head's storage (the prefill reserves exactly; kv/cache.h's
  // growth step is 1/16 of the head), a one-off a steady decode amortizes
  // over n/16 steps. Mean over the repetitions, in ms.
  double first_decode_ms = 0;
  double evict_us_per_tok = 0;  // decode-time plan + apply per step (mean)
  double entries_per_head = 0;  // mean entries held per head after decoding
  // The policy's counters (Compressor::counters), summed over repetitions:
  // over the whole run, and over the timed decode steps alone.
  std::vector<std::pair<std::string, int64_t>> counters, decode_counters;
  double kv_ratio = 1;          // retention ratio used (mean; r* with a quality target)
  int inner_reps = 1;            // runs timed together in the last repetition (bench_repeat.h)
  bool below_resolution = false; // a prefill or decode figure spans fewer than the minimum clock steps
  bool compress_resolved = true; // compress_ms summed over every run spans the minimum clock steps
};

// PeakRssBytes: kvtrim/report.h (VmHWM, bytes; 0 if unknown).

Stat MeanSd(const std::vector<double>& xs);
Expected<std::vector<BenchRow>> RunBench(const Engine& e, const BenchOptions& o);
// Read bandwidth in GB/s: all pool threads sum their share of a float
// buffer of `bytes` with vector loads; best of reps. A buffer far larger than
// the caches gives the DRAM bound, one the size of the weights the bound for
// a working set that stays in cache.
double MeasureReadBandwidth(const Engine& e, size_t bytes, int reps);

// The multiply-add peak of all pool threads at once (kernels/fma_peak.h),
// best of reps, in G operations a second (a multiply and an add counting
// two); 0 for a kind this CPU lacks (bf16: AVX512-BF16; int8: AVX512-VNNI).
struct FmaPeak {
  double f32 = 0, bf16 = 0, int8 = 0;
};
FmaPeak MeasureFmaPeak(const Engine& e, int reps);
// FLOPs per token of a full-cache causal prefill of n tokens: the layers'
// matrix products (2 x their weights: q, k, v, o and the three FFN
// matrices) and attention (2 x 2 x head_dim per query head for each of the
// (n + 1) / 2 keys a token reads on average: QK^T and PV); the output head,
// computed for the last token only, is left out.
double PrefillFlopsPerToken(const Engine& e, int64_t n);

}  // namespace kvtrim
