// Admission for the requests that run the model: at most `parallel` at once
// (each on its own slot, with its own thread pool: one ThreadPool serves one
// caller at a time), at most `queue` more waiting, served first come first
// served; beyond that a request is refused at once (the server answers 503).
// Thread-safe.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "kernels/thread_pool.h"

namespace kvtrim::server {

class Scheduler {
 public:
  // threads_per_slot <= 0: every slot runs on the engine's pool (parallel 1 only).
  Scheduler(int parallel, int queue, int threads_per_slot);

  class Lease {
   public:
    Lease(Scheduler* s, int slot) : s_(s), slot_(slot) {}
    ~Lease() { s_->Release(slot_); }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    // The pool a session on this slot runs on (nullptr: the engine's).
    kernels::ThreadPool* pool() const { return s_->pools_.empty() ? nullptr : s_->pools_[slot_].get(); }
    int slot() const { return slot_; }

   private:
    Scheduler* s_;
    int slot_;
  };

  // Waits for a free slot (`slot` >= 0: that one, llama-server's id_slot;
  // in [0, parallel())); nullptr when `queue` requests are already waiting.
  // First come, first served either way: a request waiting for a busy slot
  // holds back the ones behind it.
  std::unique_ptr<Lease> Acquire(int slot = -1);

  int parallel() const { return static_cast<int>(busy_.size()); }
  int queued() const;   // requests waiting for a slot now
  int active() const;   // slots in use now
  int64_t rejected() const;

 private:
  void Release(int slot);
  const int queue_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<bool> busy_;
  std::vector<std::unique_ptr<kernels::ThreadPool>> pools_;
  int waiting_ = 0, active_ = 0;
  uint64_t next_ticket_ = 0, head_ = 0;  // tickets handed out / the next one served
  int64_t rejected_ = 0;
};

}  // namespace kvtrim::server
