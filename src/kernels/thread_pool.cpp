#include "kernels/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#define KVTRIM_PAUSE() _mm_pause()
#else
#define KVTRIM_PAUSE() std::this_thread::yield()
#endif

namespace kvtrim::kernels {
namespace {
constexpr int kSpinIters = 20000;
}

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
    generation_.fetch_add(1);
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain) {
  if (n <= 0) return;
  int chunks = static_cast<int>(std::min<int64_t>(n_threads_, (n + grain - 1) / std::max<int64_t>(1, grain)));
  if (chunks <= 1) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    job_ = &fn;
    job_n_ = n;
    job_chunks_ = chunks;
    pending_.store(chunks - 1);
    generation_.fetch_add(1, std::memory_order_release);
  }
  cv_.notify_all();
  fn(0, n / chunks);  // chunk 0 on the calling thread
  while (pending_.load(std::memory_order_acquire) > 0) KVTRIM_PAUSE();
}

void ThreadPool::WorkerLoop(int id) {
  uint64_t seen = 0;
  for (;;) {
    int spins = 0;
    while (generation_.load(std::memory_order_acquire) == seen && spins < kSpinIters) {
      KVTRIM_PAUSE();
      ++spins;
    }
    if (generation_.load(std::memory_order_acquire) == seen) {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return generation_.load() != seen; });
    }
    if (stop_) return;
    const std::function<void(int64_t, int64_t)>* job;
    int64_t n;
    int chunks;
    {
      std::lock_guard<std::mutex> lk(mu_);
      seen = generation_.load();
      job = job_;
      n = job_n_;
      chunks = job_chunks_;
    }
    if (id < chunks) {
      (*job)(n * id / chunks, n * (id + 1) / chunks);
      pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }
}

}  // namespace kvtrim::kernels
