// Jobs in ordered lanes: lane h's blocks run one at a time and in order (its
// consumer, e.g. a statistics tap of one KV head, is not thread-safe and
// expects its tiles in sequence), any lane's next block on whichever thread
// is free. Three KV heads on two threads, one head per thread, left a thread
// idle a third of the time; in lanes of blocks both stay busy.
#pragma once
#include <functional>

#include "kernels/thread_pool.h"

namespace kvtrim::kernels {

// Calls fn(lane, block) for every lane < lanes and block < blocks; within a
// lane, block b + 1 starts after block b has returned (on any thread).
void RunOrderedLanes(ThreadPool& pool, int lanes, int blocks, const std::function<void(int, int)>& fn);

}  // namespace kvtrim::kernels
