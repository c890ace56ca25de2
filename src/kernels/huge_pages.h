// Memory for the large arrays a decode step streams through (the repacked
// weights, the KV arrays, the read-bandwidth probe), mapped so that the
// kernel can back it with transparent huge pages (2 MiB). With 4 KiB pages
// a pass over a 500 MB model touches 120,000 pages: a TLB miss each, and
// the hardware prefetchers stop at every page boundary; on the 2-core VM
// (THP "madvise") the Llama-3.2-1B shape decoded 1.12-1.24x faster with
// them in huge pages (docs/results/decode-int8-lanes-huge-pages.md).
//
// No Debian library does this for anonymous memory (libhugetlbfs serves
// hugetlbfs mounts, not THP), so it is written here: a mapping of the size
// plus 2 MiB of address space, trimmed to start on a 2 MiB boundary,
// advised MADV_HUGEPAGE. Only the address space is padded: the pages a
// mapping's tail does not fill are never touched, so no memory is wasted.
// Arrays under 2 MiB, systems without madvise and AddressSanitizer builds
// (whose redzones guard only its own allocations) get operator new.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <new>
#include <type_traits>
#include <vector>

namespace kvtrim::kernels {

constexpr size_t kHugePageBytes = size_t{2} << 20;

// At least `bytes` bytes, 64-byte aligned (bytes >= kHugePageBytes: 2 MiB
// aligned and advised into huge pages where the kernel has them). Throws
// std::bad_alloc as new does.
void* AllocateStreamed(size_t bytes);
// Frees what AllocateStreamed(bytes) returned (the same bytes).
void FreeStreamed(void* p, size_t bytes) noexcept;

// Many arrays under 2 MiB (the repacks of a small model's matrices: 0.9 MiB
// each on SmolLM2-135M) placed one after the other in chunks of 64 MiB of
// AllocateStreamed memory, so they share huge pages. Nothing is freed until
// the arena is (when the last allocator holding it goes): for arrays
// allocated once and kept, as a model's weights are.
class StreamedArena {
 public:
  StreamedArena() = default;
  StreamedArena(const StreamedArena&) = delete;
  StreamedArena& operator=(const StreamedArena&) = delete;
  ~StreamedArena();
  void* Allocate(size_t bytes);  // 64-byte aligned; throws std::bad_alloc

 private:
  struct Chunk {
    void* p;
    size_t bytes;
  };
  std::mutex mu_;
  std::vector<Chunk> chunks_;
  size_t used_ = 0;  // in the last chunk
};

// std::allocator's stand-in for streamed arrays: from `arena` where one is
// given (deallocate then does nothing), else AllocateStreamed.
template <class T>
struct StreamedAllocator {
  using value_type = T;
  using propagate_on_container_copy_assignment = std::true_type;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;
  StreamedAllocator() = default;
  explicit StreamedAllocator(std::shared_ptr<StreamedArena> a) : arena(std::move(a)) {}
  template <class U>
  StreamedAllocator(const StreamedAllocator<U>& o) noexcept : arena(o.arena) {}
  T* allocate(size_t n) {
    if (n > static_cast<size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(arena ? arena->Allocate(n * sizeof(T)) : AllocateStreamed(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) noexcept {
    if (!arena) FreeStreamed(p, n * sizeof(T));
  }
  template <class U>
  bool operator==(const StreamedAllocator<U>& o) const noexcept {
    return arena == o.arena;
  }
  std::shared_ptr<StreamedArena> arena;
};

template <class T>
using StreamedVector = std::vector<T, StreamedAllocator<T>>;

}  // namespace kvtrim::kernels
