// The results of an eval sweep and their renderings: a table for stdout,
// JSON, CSV, and plots of score against retention ratio through gnuplot.
#pragma once
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "kvtrim/status.h"

namespace kvtrim::eval {

// One (task, method, ratio) cell: means with standard errors over n samples.
struct Cell {
  std::string task;    // "niah", ..., or "fidelity" (KL/NLL on plain text)
  std::string method;  // policy name ("full" is the reference)
  double ratio = 1.0;
  int n = 0;
  double accuracy = 0, accuracy_se = 0;    // needle tasks only (NaN for fidelity)
  double kl = 0, kl_se = 0;                // mean KL(full || compressed) per position
  double nll_ratio = 1, nll_ratio_se = 0;  // NLL(compressed) / NLL(full)
  double kv_bytes = 0, kv_bytes_full = 0;  // mean bytes held after compression vs a full cache
  double kv_bytes_peak = NAN;              // mean of the most bytes held at once (Session::peak_kv_bytes)
  double compress_ms = 0;                  // mean prefill-time compression time
  // The samples' compression times sum to fewer than kMinClockSteps
  // steps of the wall clock (io/clock.h): the mean is below its resolution.
  bool compress_below_res = false;
  // Why some or all samples have no numbers: "n/a: ..." (the protocol does
  // not apply to this method) or "unreachable: ..." (the method cannot meet
  // this ratio); empty when every sample was measured.
  std::string note;
  // Policy counters (e.g. KVSlimmer's merges and fallbacks), mean per sample.
  std::vector<std::pair<std::string, double>> counters;
  // --kv-quality runs (ratio = the quality target TAU): the ratio r* chosen
  // per context (mean, min, max), the measured quality y = NLL(full) /
  // NLL(compressed) (mean, se) and the samples whose y fell below TAU.
  double chosen_ratio = NAN, chosen_min = NAN, chosen_max = NAN;
  double quality = NAN, quality_se = NAN;
  int below_target = 0;
  // --head-budget adaptive: entries each KV head kept right after compression
  // (flat l * n_head_kv + h), mean over the samples; empty otherwise.
  std::vector<double> head_entries;
  // Needle tasks: SampleRecord::needle_kept, mean per KV head over the
  // samples, and its mean over the heads (NaN: not a needle task).
  std::vector<double> needle_kept;
  double needle_kept_mean = NAN;
  // Needle tasks: retention, among the samples the full cache answers
  // (retention_n of them), the share this cell's method answers too, with
  // its Wilson 95% interval (include/kvtrim/eval_paired.h); NaN when the
  // full cache answers none or for fidelity tasks.
  int retention_n = 0;
  double retention = NAN, retention_lo = NAN, retention_hi = NAN;
};

// One (unit, method, ratio) measurement; cells are summaries of these. A unit
// is one (task, sample) pair: the smallest piece of work a shard runs.
struct SampleRecord {
  std::string task, method;
  double ratio = 1.0;
  int unit = 0;    // global unit index (the order cells are summed in)
  int sample = 0;  // index within the task
  double accuracy = 0, kl = 0, nll_ratio = 1;  // accuracy NaN for fidelity tasks
  double kv_bytes = 0, kv_bytes_full = 0, compress_ms = 0;
  // The most bytes the method's session held at once (its copy of the
  // prefilled cache, a reference pass's copy, decode steps; NaN: not measured).
  double kv_bytes_peak = NAN;
  long long entries_compressed = 0;  // entries held right after compression
  long long entries_end = 0;         // ... and at the end of the unit's continuation
  std::string note;                  // non-empty: not measured, and why
  bool truncated = false;            // task-file sample cut in the middle to fit
  std::vector<std::pair<std::string, double>> counters;  // the policy's counters at the end of the unit
  double chosen_ratio = NAN;         // --kv-quality: the ratio r* chosen for this context
  std::vector<int> head_entries;     // budgets that differ per head (adaptive, threshold, profile, KVzip's shared): per KV head after compression
  // Needle tasks: per KV head (flat layer * n_head_kv + head), the share of
  // the asked needles' tokens whose entries the head holds right after
  // compression (1 for the full cache); empty for other tasks.
  std::vector<double> needle_kept;
};

struct ReportMeta {
  std::string model, haystack, mode;  // mode: "query-agnostic" / "query-aware"
  int context_tokens = 0, samples = 0, threads = 0;
  unsigned long long seed = 0;
  double elapsed_s = 0;
  int64_t clock_step_ns = 0;  // the wall clock's step on the machine that timed it (io/clock.h)
  std::string command;  // the command line that produced it
  // The sweep's shape, so partial reports can be merged into the same cells.
  std::vector<std::string> tasks, methods;  // cell order; methods start with "full"
  std::vector<double> ratios;
  std::string shard;                 // "i/n" for a partial report, empty for a whole run
  int units_total = 0;               // (task, sample) units of the whole run
  std::vector<int> units;            // the units this report holds
  std::string fingerprint;           // the options that must agree for a merge
  std::string max_context;           // task files: "skip" or "truncate" (middle)
  std::vector<std::string> task_file_notes;  // per task file: samples read, skipped, truncated
  double quality_target = 0;         // --kv-quality TAU (0: ratios are fixed)
  std::string kv_storage;            // the KV type and when entries take it (KvStorage)
  std::vector<std::string> notes;    // e.g. the threshold each POLICY+threshold cell ran at
};

// The report's line on KV storage, e.g. "f32 (the reference: entries
// computed, compressed and kept in f32)" or "q8_0, rotated (--kv-rotate)
// (computed and compressed in f32, then what is kept is quantized)";
// rotate as KvOptions::rotate.
std::string KvStorage(const std::string& quant, const std::string& quant_at, const std::string& rotate);

struct Report {
  ReportMeta meta;
  std::vector<Cell> cells;
  std::vector<SampleRecord> samples;  // every measurement behind the cells
};

// Cells from sample records, in the order of meta.tasks x meta.methods x
// ratios ("full" at ratio 1 only); each cell sums its samples in unit order,
// so any split of the units into shards gives bit-identical cells.
std::vector<Cell> SummarizeCells(const ReportMeta& meta, std::vector<SampleRecord> samples);
// Per task-file task: samples run, and how many were truncated or skipped.
std::vector<std::string> TaskFileNotes(const ReportMeta& meta, const std::vector<SampleRecord>& samples);

std::string FormatTable(const Report& r);
Status WriteJson(const Report& r, const std::string& path);
Status WriteCsv(const Report& r, const std::string& path);
// Writes <dir>/plot_<metric>.gp and renders <dir>/<metric>.png with gnuplot:
// one plot per metric (accuracy per task, kl, nll_ratio), one line per
// method, retention ratio on x. Returns the files written.
Expected<std::vector<std::string>> WritePlots(const Report& r, const std::string& dir);

// Every sample record, one JSON object a line (numbers exact; NaN as null).
Status WriteSamples(const Report& r, const std::string& path);
// A report folder written by `kvtrim eval`: report.json's meta and samples.jsonl.
Expected<Report> ReadReportDir(const std::string& dir);
// Partial reports of one sharded sweep combined into the whole run's report:
// same options (fingerprint), disjoint shards covering every unit once.
Expected<Report> MergeReports(const std::vector<Report>& parts);

}  // namespace kvtrim::eval
