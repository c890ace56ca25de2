#include "kernels/scratch.h"

#include <algorithm>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace kvtrim::kernels {

HugeBuffer AllocHuge(size_t floats) {
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t bytes = (floats * sizeof(float) + kHuge - 1) / kHuge * kHuge;  // aligned_alloc: a multiple
  void* p = bytes ? std::aligned_alloc(kHuge, bytes) : nullptr;
#if defined(__linux__)
  if (p) ::madvise(p, bytes, MADV_HUGEPAGE);  // advice only: without THP the pages stay small
#endif
  if (!p) p = std::malloc(std::max<size_t>(floats * sizeof(float), 1));  // never malloc(0): its null is no failure
  if (!p) throw std::bad_alloc();
  return HugeBuffer(static_cast<float*>(p));
}

HugeScratch::Lease HugeScratch::Take(size_t floats) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // The smallest free buffer that is large enough; else a new one, the
    // largest free buffer (too small) freed so the count stays bounded.
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (it->first >= floats && (best == free_.end() || it->first < best->first)) best = it;
    if (best != free_.end()) {
      Lease l(this, std::move(best->second), best->first);
      free_.erase(best);
      return l;
    }
    if (!free_.empty()) {
      auto largest = std::max_element(free_.begin(), free_.end(),
                                      [](const auto& a, const auto& b) { return a.first < b.first; });
      free_.erase(largest);
    }
  }
  return Lease(this, AllocHuge(floats), floats);
}

void HugeScratch::GiveBack(HugeBuffer buf, size_t floats) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.emplace_back(floats, std::move(buf));
}

size_t HugeScratch::held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return free_.size();
}

}  // namespace kvtrim::kernels
