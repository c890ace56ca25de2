#include "kernels/ordered_blocks.h"

#include <atomic>
#include <memory>
#include <thread>

namespace kvtrim::kernels {

void RunOrderedLanes(ThreadPool& pool, int lanes, int blocks, const std::function<void(int, int)>& fn) {
  if (lanes <= 0 || blocks <= 0) return;
  if (pool.size() <= 1 || lanes * blocks == 1) {
    for (int h = 0; h < lanes; ++h)
      for (int b = 0; b < blocks; ++b) fn(h, b);
    return;
  }
  // next[h]: lane h's next block, advanced only by the thread holding busy[h]
  // (the flag's acquire/release orders a lane's blocks across threads).
  std::unique_ptr<std::atomic<int>[]> next(new std::atomic<int>[lanes]);
  std::unique_ptr<std::atomic<bool>[]> busy(new std::atomic<bool>[lanes]);
  for (int h = 0; h < lanes; ++h) next[h].store(0), busy[h].store(false);
  std::atomic<int> left{lanes * blocks};
  pool.ParallelFor(pool.size(), [&](int64_t, int64_t) {
    while (left.load(std::memory_order_acquire) > 0) {
      int pick = -1, most = 0;  // the free lane with the most blocks left
      for (int h = 0; h < lanes; ++h) {
        const int rest = blocks - next[h].load(std::memory_order_relaxed);
        if (rest > most && !busy[h].load(std::memory_order_relaxed)) pick = h, most = rest;
      }
      bool expected = false;
      if (pick < 0 || !busy[pick].compare_exchange_strong(expected, true, std::memory_order_acquire)) {
        std::this_thread::yield();
        continue;
      }
      const int b = next[pick].load(std::memory_order_relaxed);
      if (b < blocks) {
        fn(pick, b);
        next[pick].store(b + 1, std::memory_order_relaxed);
        left.fetch_sub(1, std::memory_order_acq_rel);
      }
      busy[pick].store(false, std::memory_order_release);
    }
  });
}

}  // namespace kvtrim::kernels
