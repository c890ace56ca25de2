// Scratch vectors whose elements start uninitialized: resize() does not write
// zeros. For buffers that are fully written before they are read (activations
// of a batch, dequantized weight blocks): value-initializing them was 3% of a
// 512-token prefill (memset), on top of the page faults of fresh memory.
#pragma once
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <vector>

namespace kvtrim::kernels {

template <class T>
struct DefaultInitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() = default;
  template <class U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}
  // resize(n) and vector(n) construct with no arguments: default-initialize
  // (no write for trivial types) instead of value-initialize.
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    std::allocator_traits<std::allocator<T>>::construct(static_cast<std::allocator<T>&>(*this), p,
                                                        std::forward<Args>(args)...);
  }
};

template <class T>
using ScratchVector = std::vector<T, DefaultInitAllocator<T>>;

// Floats for one large short-lived matrix (Attention Matching's [M, n]
// scores), uninitialized, aligned to 2 MiB and advised into transparent
// huge pages where the kernel offers them: a fresh 32 MiB buffer's first
// writes then fault 16 times, not 8,192 (12.7 -> 5.1 ms measured on the
// machine here, whose THP setting is "madvise"). Never null: a failed
// aligned allocation falls back to malloc, and that failing throws
// std::bad_alloc as new does.
struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using HugeBuffer = std::unique_ptr<float[], FreeDeleter>;
HugeBuffer AllocHuge(size_t floats);

}  // namespace kvtrim::kernels
