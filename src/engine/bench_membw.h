// `kvtrim bench --membw`: the read-bandwidth probe the decode rows are read
// against. One buffer, allocated and touched once, read again wherever a
// figure is wanted: once before the rows (the header's figure) and beside
// every row's timed decode steps (just before and just after them), so a
// row's share is of what the memory gave within seconds of its decode, not
// minutes before it (this VM's reading moved 30-80 GB/s within an hour).
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
