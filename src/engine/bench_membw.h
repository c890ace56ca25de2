// `kvtrim bench --membw`: the read-bandwidth probe the decode rows are read
// against. RunBench allocates and touches one buffer for a run and reads it
// again beside every row's timed decode steps (just before and just after
// them), so a row's share is of what the memory gave within seconds of its
// decode, not minutes before it (on the 2-core VM the probes beside a row
// read 0.45-2.3x a sweep's first one). MeasureReadBandwidth, the figure
// printed before the rows, makes a probe of its own.
#pragma once
#include <cstddef>

#include "kernels/huge_pages.h"
#include "kernels/thread_pool.h"

namespace kvtrim {

class ReadProbe {
 public:
  // A float buffer of `bytes`, in huge pages where the kernel has them (as
  // the weights and KV arrays the decode streams), its pages touched in
  // the split the pool's readers use.
  ReadProbe(kernels::ThreadPool& pool, size_t bytes);
  // GB/s: every pool thread sums its share of the buffer with vector loads,
  // as many passes as span the clock's minimum steps; best of reps.
  double Measure(int reps);

 private:
  kernels::ThreadPool& pool_;
  kernels::StreamedVector<float> buf_;
};

}  // namespace kvtrim
