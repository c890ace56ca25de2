// A small persistent thread pool for parallel loops. The loop is cut into
// chunks that every participating thread (the caller included) claims from
// an atomic counter, so a thread the OS has descheduled holds up at most the
// chunk it claimed. Waiting threads spin briefly, then yield the CPU, then
// (workers only) sleep, so a loaded machine degrades gracefully.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kvtrim::kernels {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  // Calls fn(begin, end) over [0, n) in contiguous chunks of at least
  // `grain` items; runs inline when there is only one chunk or one thread.
  // Callers on several threads are served one loop at a time (not reentrant:
  // fn must not call ParallelFor on the same pool).
  void ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain = 1);

 private:
  struct Job {
    const std::function<void(int64_t, int64_t)>* fn = nullptr;
    int64_t n = 0;
    int chunks = 0;
  };
  void WorkerLoop();
  void RunChunks(const Job& job);
  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::mutex call_mu_;  // one ParallelFor at a time (sessions on several threads share the engine's pool)
  std::condition_variable cv_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> next_chunk_{0};
  std::atomic<int> done_chunks_{0};
  std::atomic<int> active_{0};  // workers inside the current job
  std::atomic<bool> stop_{false};
  Job job_;
};

}  // namespace kvtrim::kernels
