// "POLICY+threshold" in a sweep: threshold eviction (--kv-threshold) judged
// beside the fixed-ratio methods at the same bytes. For each ratio column r
// the threshold T is chosen before any sample is run, on calibration
// contexts of the sweep's length drawn from the haystack with their own
// seed (never the samples themselves): the T whose mean held share after
// compression is r (bisection in log T: the share falls as T grows). The
// samples then run at that T, the total following each context; the cells
// report the bytes each actually held.
#pragma once
#include <string>
#include <vector>

#include "kvtrim/engine.h"

namespace kvtrim::eval {

inline constexpr const char kThresholdSuffix[] = "+threshold";
inline constexpr int kThresholdContexts = 4;  // calibration contexts per sweep
// Whether a method is "POLICY+threshold".
bool MethodThreshold(const std::string& method);

struct ThresholdMatch {
  double threshold = 0;  // T
  double held = 0;       // the mean share of the entries held at T on the contexts
};

// One match per ratio. kv: the method's options (its policy and flags;
// ratio and threshold unused). Contexts: prefilled once each for every
// ratio, forked at every T tried.
Expected<std::vector<ThresholdMatch>> MatchThreshold(const Engine& e, KvOptions kv, const std::vector<double>& ratios,
                                                     const std::vector<std::vector<int>>& contexts);

}  // namespace kvtrim::eval
