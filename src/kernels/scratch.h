// Scratch vectors whose elements start uninitialized: resize() does not write
// zeros. For buffers that are fully written before they are read (activations
// of a batch, dequantized weight blocks): value-initializing them was 3% of a
// 512-token prefill (memset), on top of the page faults of fresh memory.
#pragma once
#include <cstddef>
#include <memory>
#include <mutex>
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
// scores), uninitialized, from AllocateStreamed (huge_pages.h): from 2 MiB
// on aligned to 2 MiB and advised into transparent huge pages where the
// kernel offers them, so a fresh 32 MiB buffer's first writes fault 16
// times, not 8,192 (12.7 -> 5.1 ms measured on a machine whose THP setting
// is "madvise"). Never null: throws std::bad_alloc as new does.
struct StreamedDeleter {
  size_t bytes = 0;  // what AllocateStreamed was asked for: FreeStreamed needs it
  void operator()(float* p) const noexcept;
};
using HugeBuffer = std::unique_ptr<float[], StreamedDeleter>;
HugeBuffer AllocHuge(size_t floats);

// AllocHuge's buffers kept for reuse by their owner (a policy, for as long as
// it lives): a lease takes a free buffer large enough, or allocates one, and
// gives it back when it ends. Attention Matching fits a [M, n] scores buffer
// per head and chunk: a fresh one's pages fault and are zeroed by the kernel
// each time (16 MiB a head at 8k on the 135M shape, 4% of the compaction's
// CPU time in perf), a reused one's never. Holds at most as many buffers as
// were leased at once (the threads), each as large as the largest asked.
class HugeScratch {
 public:
  class Lease {
   public:
    Lease(HugeScratch* owner, HugeBuffer buf, size_t floats) : owner_(owner), buf_(std::move(buf)), floats_(floats) {}
    Lease(Lease&&) = default;
    Lease& operator=(Lease&&) = delete;
    ~Lease() {
      if (owner_ && buf_) owner_->GiveBack(std::move(buf_), floats_);
    }
    float* get() const { return buf_.get(); }

   private:
    HugeScratch* owner_;
    HugeBuffer buf_;
    size_t floats_;  // the buffer's capacity
  };
  // A buffer of at least `floats` floats, uninitialized (as AllocHuge's).
  Lease Take(size_t floats);
  size_t held() const;  // buffers free for reuse

 private:
  void GiveBack(HugeBuffer buf, size_t floats);
  mutable std::mutex mu_;
  std::vector<std::pair<size_t, HugeBuffer>> free_;  // (capacity, buffer)
};

}  // namespace kvtrim::kernels
