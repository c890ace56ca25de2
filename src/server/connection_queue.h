// The server's connection threads (an httplib TaskQueue): a fixed number of
// workers, a bounded wait list, and one overflow thread. httplib serves a
// connection on one thread for as long as it stays open (keep-alive), so
// idle clients can hold every worker; with the plain ThreadPool a new client
// then waited without bound. Here a connection that finds every worker busy
// and the wait list full is served by the overflow thread instead, where
// the handlers answer 503 with "Connection: close" (Overflowing()), so it
// is told at once and never holds a thread. The keep-alive timeout
// (--keep-alive-s) bounds how long an idle client keeps its worker.
#pragma once
#include <httplib.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kvtrim::server {

class ConnectionQueue : public httplib::TaskQueue {
 public:
  // `workers` threads; at most `wait` connections wait for one.
  ConnectionQueue(size_t workers, size_t wait);
  ~ConnectionQueue() override;
  void enqueue(std::function<void()> fn) override;
  void shutdown() override;
  // True on the overflow thread: the request must be refused (503).
  static bool Overflowing();

 private:
  std::mutex mu_;
  std::condition_variable cv_, overflow_cv_;
  std::deque<std::function<void()>> jobs_, overflow_jobs_;
  std::vector<std::thread> threads_;
  size_t workers_, wait_, busy_ = 0;
  bool shutdown_ = false;
  void Work();
  void Overflow();
};

}  // namespace kvtrim::server
