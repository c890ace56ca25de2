#include "kernels/huge_pages.h"

#include <algorithm>
#include <cstdint>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace kvtrim::kernels {
namespace {

constexpr size_t kSmallPage = 4096;
constexpr std::align_val_t kAlign{64};  // a cache line: the kernels' vectors never straddle one

// Under AddressSanitizer every array comes from operator new, so that the
// sanitizer's redzones guard it (it cannot see into a mapping of our own).
#if defined(__linux__) && defined(MADV_HUGEPAGE) && !defined(__SANITIZE_ADDRESS__)
constexpr bool kMapsPages = true;
#else
constexpr bool kMapsPages = false;
#endif

size_t PageRounded(size_t bytes) { return (bytes + kSmallPage - 1) / kSmallPage * kSmallPage; }

}  // namespace

void* AllocateStreamed(size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (kMapsPages && bytes >= kHugePageBytes) {
    const size_t len = PageRounded(bytes), span = len + kHugePageBytes;
    void* m = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    const auto base = reinterpret_cast<uintptr_t>(m);
    const uintptr_t start = (base + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
    // the padding before the boundary and after the array back to the system
    if (start > base) ::munmap(m, start - base);
    if (base + span > start + len) ::munmap(reinterpret_cast<void*>(start + len), base + span - (start + len));
    ::madvise(reinterpret_cast<void*>(start), len, MADV_HUGEPAGE);  // advice only: without THP the pages stay small
    return reinterpret_cast<void*>(start);
  }
#endif
  return ::operator new(bytes, kAlign);
}

void FreeStreamed(void* p, size_t bytes) noexcept {
  if (!p) return;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (kMapsPages && bytes >= kHugePageBytes) {
    ::munmap(p, PageRounded(bytes));
    return;
  }
#endif
  ::operator delete(p, kAlign);
}

StreamedArena::~StreamedArena() {
  for (const Chunk& c : chunks_) FreeStreamed(c.p, c.bytes);
}

void* StreamedArena::Allocate(size_t bytes) {
  constexpr size_t kChunk = size_t{64} << 20, kAlign = 64;
  bytes = (bytes + kAlign - 1) / kAlign * kAlign;
  std::lock_guard<std::mutex> lock(mu_);
  if (chunks_.empty() || used_ + bytes > chunks_.back().bytes) {
    const size_t n = std::max(kChunk, bytes);
    chunks_.reserve(chunks_.size() + 1);  // no throw after the mapping is made
    chunks_.push_back({AllocateStreamed(n), n});
    used_ = 0;
  }
  void* p = static_cast<char*>(chunks_.back().p) + used_;
  used_ += bytes;
  return p;
}

}  // namespace kvtrim::kernels
