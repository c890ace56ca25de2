// The thread pool covers every index exactly once, for any size and grain,
// and keeps working when a worker is slow (the caller takes its chunks).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "kernels/thread_pool.h"

namespace kvtrim::kernels {
namespace {

TEST(ThreadPool, CoversEveryIndexOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 7, 64, 1000}) {
      for (int64_t grain : {1, 3, 100}) {
        std::vector<std::atomic<int>> hits(n);
        pool.ParallelFor(n, [&](int64_t a, int64_t b) {
          ASSERT_LE(a, b);
          for (int64_t i = a; i < b; ++i) hits[i]++;
        }, grain);
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << threads << " " << n << " " << grain << " " << i;
      }
    }
  }
}

TEST(ThreadPool, ManyShortLoopsInARow) {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  for (int rep = 0; rep < 20000; ++rep)
    pool.ParallelFor(4, [&](int64_t a, int64_t b) { sum += b - a; });
  EXPECT_EQ(sum.load(), 4 * 20000);
}

TEST(ThreadPool, SlowChunksDoNotLoseWork) {
  ThreadPool pool(2);
  std::atomic<int> done{0};
  pool.ParallelFor(8, [&](int64_t a, int64_t b) {
    if (a == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));  // one slow chunk
    done += static_cast<int>(b - a);
  });
  EXPECT_EQ(done.load(), 8);
}

}  // namespace
}  // namespace kvtrim::kernels
