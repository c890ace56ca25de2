// TuneAllocator (kvtrim/allocator.h) against glibc's own accounting
// (mallinfo2): once tuned, a 30 MiB buffer comes from the heap (glibc's
// defaults map it afresh in a new process, as ctest runs each test), a
// 40 MiB one is still mapped, and the heap keeps what a freed buffer held.
// Skipped where malloc is not glibc's (the sanitizers replace it).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "kvtrim/allocator.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace kvtrim {
namespace {

#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
constexpr bool kGlibcMalloc = true;
#else
constexpr bool kGlibcMalloc = false;
#endif

#if defined(__GLIBC__)
// Whether a fresh block of `bytes` was mapped (glibc's count of mapped
// blocks rose while it was held); written to, so the pages are real.
bool Mapped(size_t bytes) {
  const size_t before = mallinfo2().hblks;
  void* p = std::malloc(bytes);
  if (!p) return false;
  std::memset(p, 1, bytes);
  const bool mapped = mallinfo2().hblks > before;
  std::free(p);
  return mapped;
}
#endif

TEST(Allocator, LargeBuffersComeFromTheHeapOnceTuned) {
  if (!kGlibcMalloc) GTEST_SKIP() << "malloc is not glibc's here";
#if defined(__GLIBC__)
  ASSERT_TRUE(TuneAllocator());
  EXPECT_FALSE(Mapped(size_t{30} << 20));  // under the tuned 32 MiB: the heap's
  EXPECT_FALSE(Mapped(size_t{30} << 20));
  EXPECT_TRUE(Mapped(size_t{40} << 20));  // above it: still mapped
  const size_t held = mallinfo2().arena;  // the main heap's bytes from the system
  EXPECT_GE(held, size_t{30} << 20);      // the freed 30 MiB kept, not trimmed
#endif
}

}  // namespace
}  // namespace kvtrim
