#include "server/scheduler.h"

#include <algorithm>

namespace kvtrim::server {

Scheduler::Scheduler(int parallel, int queue, int threads_per_slot)
    : queue_(std::max(0, queue)), busy_(static_cast<size_t>(std::max(1, parallel)), false) {
  if (threads_per_slot > 0)
    for (size_t i = 0; i < busy_.size(); ++i) pools_.push_back(std::make_unique<kernels::ThreadPool>(threads_per_slot));
}

std::unique_ptr<Scheduler::Lease> Scheduler::Acquire(int want) {
  std::unique_lock<std::mutex> lk(mu_);
  const int parallel = static_cast<int>(busy_.size());
  if (active_ + waiting_ >= parallel + queue_) {
    ++rejected_;
    return nullptr;
  }
  // First come, first served: a slot goes to the oldest ticket.
  const uint64_t ticket = next_ticket_++;
  ++waiting_;
  const bool pinned = want >= 0 && want < parallel;
  cv_.wait(lk, [&] { return ticket == head_ && (pinned ? !busy_[want] : active_ < parallel); });
  --waiting_;
  ++head_;
  const int slot = pinned ? want : static_cast<int>(std::find(busy_.begin(), busy_.end(), false) - busy_.begin());
  busy_[slot] = true;
  ++active_;
  lk.unlock();
  cv_.notify_all();  // the next ticket may take another free slot
  return std::make_unique<Lease>(this, slot);
}

void Scheduler::Release(int slot) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    busy_[slot] = false;
    --active_;
  }
  cv_.notify_all();
}

int Scheduler::queued() const {
  std::lock_guard<std::mutex> lk(mu_);
  return waiting_;
}

int Scheduler::active() const {
  std::lock_guard<std::mutex> lk(mu_);
  return active_;
}

int64_t Scheduler::rejected() const {
  std::lock_guard<std::mutex> lk(mu_);
  return rejected_;
}

}  // namespace kvtrim::server
