#include "kernels/scratch.h"

#include <algorithm>

#include "kernels/huge_pages.h"

namespace kvtrim::kernels {

void StreamedDeleter::operator()(float* p) const noexcept { FreeStreamed(p, bytes); }

HugeBuffer AllocHuge(size_t floats) {
  const size_t bytes = std::max<size_t>(floats * sizeof(float), 1);  // a real allocation even for 0 floats
  return HugeBuffer(static_cast<float*>(AllocateStreamed(bytes)), StreamedDeleter{bytes});
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
