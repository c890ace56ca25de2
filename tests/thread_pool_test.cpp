// The thread pool covers every index exactly once, for any size and grain,
// and keeps working when a worker is slow (the caller takes its chunks).
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <numeric>
#include <set>
#include <random>
#include <chrono>
#include <thread>
#include <vector>

#include "kernels/ordered_blocks.h"
#include "kernels/thread_pool.h"

namespace kvtrim::kernels {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

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

TEST(ThreadPool, BackToBackJobsWithDyingClosures) {
  // Each job's function and data die when ParallelFor returns; a worker that
  // wakes late for a finished job must never run it against the next job's
  // counters. Seeded pauses between jobs catch the workers at every stage of
  // spinning, yielding and sleeping. (The race this guards against needed
  // the caller to be preempted inside a few instructions; it crashed `kvtrim
  // bench` 2 times in 5 on a loaded machine, but this test did not reproduce
  // it before the fix: it exercises the path, it is no proof.)
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  std::mt19937 rng(7);
  const int reps = 30000;
  for (int rep = 0; rep < reps; ++rep) {
    auto data = std::make_unique<std::vector<int>>(8, rep);
    pool.ParallelFor(8, [&, p = data.get()](int64_t a, int64_t b) {
      for (int64_t i = a; i < b; ++i) total += (*p)[i] == rep;
    });
    data.reset();
    if (rng() % 16 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 400));
  }
  EXPECT_EQ(total.load(), 8 * reps);
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

// Ordered lanes: every (lane, block) once, a lane's blocks in order and
// never two at once (each block sleeps a little so overlaps would show),
// and more than one thread used when there are several lanes.
TEST(ThreadPool, OrderedLanesRunEachLaneInSequence) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int lanes : {1, 3, 5}) {
      const int blocks = 7;
      std::vector<std::vector<int>> order(lanes);
      std::vector<std::atomic<int>> inside(lanes);
      std::atomic<int> overlaps{0};
      std::mutex mu;
      std::set<std::thread::id> ids;
      auto threads_seen = [&] {
        std::lock_guard<std::mutex> lock(mu);
        return ids.size();
      };
      RunOrderedLanes(pool, lanes, blocks, [&](int h, int b) {
        if (inside[h].fetch_add(1) != 0) ++overlaps;
        {
          std::lock_guard<std::mutex> lock(mu);
          ids.insert(std::this_thread::get_id());
        }
        // Lane 0's first block holds its thread until another thread has
        // run a block of another lane (5 s at most): on a loaded machine the
        // pool's workers may wake late, but a pool that never runs two
        // lanes at once would make this wait run out.
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        if (threads > 1 && lanes > 1 && h == 0 && b == 0)
          while (threads_seen() < 2 && std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        order[h].push_back(b);  // safe only if the lane is serial
        inside[h].fetch_sub(1);
      });
      EXPECT_EQ(overlaps.load(), 0);
      for (int h = 0; h < lanes; ++h) {
        std::vector<int> want(blocks);
        std::iota(want.begin(), want.end(), 0);
        EXPECT_EQ(order[h], want) << "lane " << h;
      }
      if (threads > 1 && lanes > 1) {
        EXPECT_GT(ids.size(), 1u) << threads << " threads, " << lanes << " lanes";
      }
    }
  }
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::kernels
