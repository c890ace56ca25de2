// The eval sweep: every method at every retention ratio on the same samples,
// in the same run, with the uncompressed cache as the reference.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "kvtrim/eval_report.h"
#include "kvtrim/eval_tasks.h"
#include "kvtrim/engine.h"

namespace kvtrim::eval {

// Tokens kept free after the context for the question's answer: a sweep at
// --context N needs a model context of N + kAnswerRoom.
inline constexpr int kAnswerRoom = 48;  // four 7-digit values tokenize to ~36 tokens

struct SweepOptions {
  std::vector<std::string> methods;          // policies ("full" is always run as the reference)
  std::vector<double> ratios = {0.5, 0.25, 0.1};
  std::vector<TaskKind> tasks;               // needle tasks
  std::vector<std::string> task_files;       // RULER / LongBench JSONL files (task_file.h)
  bool truncate_long = true;                 // task-file samples over the context: truncate (middle) or skip
  bool fidelity = true;                      // "fidelity": compress the prefix, append the continuation
  bool fidelity_decode = true;               // "fidelity-decode": the budget holds while it is decoded
  int samples = 16;                          // per task
  uint64_t seed = 1;
  int context_tokens = 0;                    // 0: the model's context minus the answer room
  bool query_aware = false;                  // compress the question too
  // Needle and task-file contexts are decoded token by token under the
  // budget (decode-time policies only; prefill-time ones are n/a), so the
  // needle must survive decode-time compression.
  bool stream_context = false;
  std::string haystack;                      // text file
  KvOptions kv;                              // policy flags and quantization shared by all methods
  int fidelity_continuation = 256;           // teacher-forced tokens after the compressed part
  TaskOptions task;                          // needles / queries
  // Context-calibrated ratios (`--kv-quality TAU --calibration FILE`): every
  // method compresses each context at r* = ChooseRatio(fit, NLL(context), TAU)
  // instead of the fixed ratios; cells are keyed by TAU.
  double quality = 0;
  std::string calibration;
  int shard_index = 0, shard_count = 1;      // run units u with u % shard_count == shard_index
  std::function<void(int done, int total)> progress;
};

// The options that must agree between shards of one sweep (model aside).
std::string Fingerprint(const SweepOptions& o);

// One method at one ratio, from the flags shared by a sweep (`shared`): the
// method takes only its own policy flags, the ratio is explicit (1 keeps
// everything, whatever a policy's own sizing rule), no quality target (the
// caller picks r* itself), and `full` stays in f32. Used by the sweep and by
// `kvtrim calibrate`.
// A method may name a policy with a suffix: "POLICY+adaptive" is POLICY under
// --head-budget adaptive (its own column beside POLICY, e.g. snapkv+adaptive).
KvOptions MethodOptions(const KvOptions& shared, const std::string& method, double ratio);
// The policy a method runs ("snapkv+adaptive" -> "snapkv"), and whether it
// asks for adaptive head budgets.
std::string MethodPolicy(const std::string& method);
bool MethodAdaptive(const std::string& method);

Expected<Report> RunSweep(const Engine& e, const SweepOptions& o);

}  // namespace kvtrim::eval
