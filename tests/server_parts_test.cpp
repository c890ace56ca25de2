// kvtrim serve's parts without HTTP: the context store (LRU by bytes) and the
// scheduler (bounded slots, bounded FIFO queue, a pool per slot).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "server/context_store.h"
#include "server/scheduler.h"

namespace kvtrim::server {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

std::shared_ptr<StoredContext> Ctx(size_t bytes) {
  auto c = std::make_shared<StoredContext>();
  c->bytes_held = bytes;
  return c;
}

TEST(ServerContextStore, DropsLeastRecentlyUsedByBytes) {
  ContextStore st(100);
  auto a = st.Put(Ctx(40)), b = st.Put(Ctx(40));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a.value(), "ctx-1");
  EXPECT_EQ(b.value(), "ctx-2");
  EXPECT_EQ(st.bytes(), 80u);
  ASSERT_NE(st.Get(a.value()), nullptr);  // a is now the most recent
  auto held = st.Get(b.value());          // a request still forking b ...
  ASSERT_TRUE(st.Get(a.value()));
  auto c = st.Put(Ctx(30));                // 80 + 30 > 100: b (least recent) goes
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(st.Get(b.value()), nullptr);
  EXPECT_NE(held, nullptr);  // ... keeps it alive
  EXPECT_EQ(st.bytes(), 70u);
  EXPECT_EQ(st.evicted(), 1);
  EXPECT_EQ(st.Ids(), (std::vector<std::string>{"ctx-3", "ctx-1"}));
  auto big = st.Put(Ctx(101));
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.error().message.find("more than the whole context store"), std::string::npos);
  EXPECT_EQ(st.size(), 2u);  // nothing dropped for a context that cannot fit
  auto d = st.Put(Ctx(100));  // exactly the capacity: everything else goes
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(st.size(), 1u);
  EXPECT_EQ(st.bytes(), 100u);
  EXPECT_TRUE(st.Erase(d.value()));
  EXPECT_FALSE(st.Erase(d.value()));
  EXPECT_EQ(st.bytes(), 0u);
}

TEST(ServerScheduler, BoundedSlotsAndFifoQueue) {
  Scheduler s(1, 2, 0);
  auto first = s.Acquire();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->pool(), nullptr);  // parallel 1: the engine's pool
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::thread> th;
  for (int k = 0; k < 2; ++k) {
    th.emplace_back([&, k] {
      auto l = s.Acquire();
      ASSERT_TRUE(l);
      std::lock_guard<std::mutex> lk(mu);
      order.push_back(k);
    });
    for (int i = 0; i < 5000 && s.queued() < k + 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_EQ(s.queued(), k + 1);
  }
  EXPECT_EQ(s.Acquire(), nullptr);  // 1 running + 2 waiting: full
  EXPECT_EQ(s.rejected(), 1);
  EXPECT_EQ(s.active(), 1);
  first.reset();
  for (auto& t : th) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1}));  // in arrival order
  EXPECT_EQ(s.active(), 0);
  EXPECT_EQ(s.queued(), 0);
}

TEST(ServerScheduler, APinnedRequestWaitsForItsSlot) {
  // llama-server's id_slot: slot 1 asked while slot 0 is free waits for slot 1.
  Scheduler s(2, 2, 0);
  auto one = s.Acquire(1);
  ASSERT_TRUE(one);
  EXPECT_EQ(one->slot(), 1);
  auto any = s.Acquire();  // the free one
  ASSERT_TRUE(any);
  EXPECT_EQ(any->slot(), 0);
  any.reset();  // slot 0 free again
  std::atomic<int> got{-1};
  std::thread t([&] {
    auto l = s.Acquire(1);
    ASSERT_TRUE(l);
    got = l->slot();
  });
  for (int i = 0; i < 5000 && s.queued() < 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(s.queued(), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(got.load(), -1);  // still waiting, slot 0 free beside it
  one.reset();
  t.join();
  EXPECT_EQ(got.load(), 1);
  EXPECT_EQ(s.active(), 0);
}

TEST(ServerScheduler, EachSlotHasItsOwnPool) {
  Scheduler s(2, 0, 1);
  auto a = s.Acquire(), b = s.Acquire();
  ASSERT_TRUE(a && b);
  ASSERT_NE(a->pool(), nullptr);
  EXPECT_NE(a->pool(), b->pool());
  EXPECT_EQ(a->pool()->size(), 1);
  EXPECT_EQ(s.Acquire(), nullptr);  // queue 0
  const kernels::ThreadPool* pa = a->pool();
  a.reset();
  auto c = s.Acquire();  // the freed slot, with its pool
  ASSERT_TRUE(c);
  EXPECT_EQ(c->pool(), pa);
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::server
