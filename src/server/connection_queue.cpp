#include "server/connection_queue.h"

namespace kvtrim::server {

namespace {
thread_local bool t_overflow = false;
}

ConnectionQueue::ConnectionQueue(size_t workers, size_t wait) : workers_(workers), wait_(wait) {
  for (size_t i = 0; i < workers; ++i) threads_.emplace_back([this] { Work(); });
  threads_.emplace_back([this] { Overflow(); });
}

ConnectionQueue::~ConnectionQueue() { shutdown(); }

bool ConnectionQueue::Overflowing() { return t_overflow; }

void ConnectionQueue::enqueue(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (busy_ + jobs_.size() < workers_ + wait_) {
      jobs_.push_back(std::move(fn));
      cv_.notify_one();
      return;
    }
    overflow_jobs_.push_back(std::move(fn));
  }
  overflow_cv_.notify_one();
}

void ConnectionQueue::shutdown() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (shutdown_ && threads_.empty()) return;
    shutdown_ = true;
  }
  cv_.notify_all();
  overflow_cv_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

void ConnectionQueue::Work() {
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [this] { return shutdown_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // shut down, nothing left
      fn = std::move(jobs_.front());
      jobs_.pop_front();
      ++busy_;
    }
    fn();
    std::lock_guard<std::mutex> lk(mu_);
    --busy_;
  }
}

void ConnectionQueue::Overflow() {
  t_overflow = true;
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> lk(mu_);
      overflow_cv_.wait(lk, [this] { return shutdown_ || !overflow_jobs_.empty(); });
      if (overflow_jobs_.empty()) return;
      fn = std::move(overflow_jobs_.front());
      overflow_jobs_.pop_front();
    }
    fn();
  }
}

}  // namespace kvtrim::server
