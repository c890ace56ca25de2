// The eval sweep: every method at every retention ratio on the same samples,
// in the same run, with the uncompressed cache as the reference.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "eval/report.h"
#include "eval/tasks.h"
#include "kvtrim/engine.h"

namespace kvtrim::eval {

struct SweepOptions {
  std::vector<std::string> methods;          // policies ("full" is always run as the reference)
  std::vector<double> ratios = {1, 0.5, 0.25, 0.1};
  std::vector<TaskKind> tasks;               // needle tasks
  bool fidelity = true;                      // KL / NLL on plain haystack text
  int samples = 16;                          // per task
  uint64_t seed = 1;
  int context_tokens = 0;                    // 0: the model's context minus the answer room
  bool query_aware = false;                  // compress the question too
  std::string haystack;                      // text file
  KvOptions kv;                              // policy flags and quantization shared by all methods
  int fidelity_continuation = 256;           // teacher-forced tokens after the compressed part
  TaskOptions task;                          // needles / queries
  std::function<void(int done, int total)> progress;
};

Expected<Report> RunSweep(const Engine& e, const SweepOptions& o);

}  // namespace kvtrim::eval
