// Streamed memory (kernels/huge_pages.h): large arrays start on a 2 MiB
// boundary in a mapping advised into transparent huge pages (the kernel's
// own smaps says whether the mapping is eligible), an arena lays arrays one
// after the other, and repacked weights in an arena compute the same
// products, byte for byte, as repacks in their own memory.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "kernels/huge_pages.h"
#include "kernels/qgemm.h"
#include "kernels/qgemm_packed.h"
#include "kernels/quant.h"
#include "test_util.h"

namespace kvtrim::kernels {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

// Whether AllocateStreamed maps its own pages (not under AddressSanitizer:
// huge_pages.cpp).
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kMapsPages = false;
#else
constexpr bool kMapsPages = true;
#endif

// The system's THP mode ("always", "madvise" or "never"), or "" where it
// has none.
std::string ThpMode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (!std::getline(f, line)) return "";
  const size_t a = line.find('['), b = line.find(']');
  return a == std::string::npos || b == std::string::npos ? "" : line.substr(a + 1, b - a - 1);
}

// The THPeligible field of the mapping holding p in /proc/self/smaps (-1:
// not found).
int ThpEligible(const void* p) {
  std::ifstream f("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(f, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= at && at < hi;
      continue;
    }
    if (inside && line.rfind("THPeligible:", 0) == 0) return std::stoi(line.substr(12));
  }
  return -1;
}

TEST(StreamedMemory, LargeArraysStartOnAHugePageAndAreAdvised) {
  const size_t bytes = (size_t{5} << 20) + 100;
  auto* p = static_cast<uint8_t*>(AllocateStreamed(bytes));
  if (kMapsPages) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kHugePageBytes, 0u);
  }
  for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(i * 7);
  size_t wrong = 0;
  for (size_t i = 0; i < bytes; ++i) wrong += p[i] != static_cast<uint8_t>(i * 7);
  EXPECT_EQ(wrong, 0u);
  const std::string mode = ThpMode();
  if (kMapsPages && (mode == "always" || mode == "madvise")) {
    EXPECT_EQ(ThpEligible(p), 1) << "THP " << mode;
  }
  FreeStreamed(p, bytes);
  // small arrays: operator new's memory, 64-byte aligned
  auto* s = static_cast<uint8_t*>(AllocateStreamed(1000));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(s) % 64, 0u);
  std::memset(s, 1, 1000);
  FreeStreamed(s, 1000);
}

TEST(StreamedMemory, ArenaLaysArraysOneAfterAnother) {
  StreamedArena arena;
  auto* a = static_cast<char*>(arena.Allocate(1000));
  auto* b = static_cast<char*>(arena.Allocate(3000));
  auto* c = static_cast<char*>(arena.Allocate(64));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  if (kMapsPages) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % kHugePageBytes, 0u);  // the first chunk's start
  }
  EXPECT_EQ(b - a, 1024);  // 1000 rounded up to 64 bytes
  EXPECT_EQ(c - b, 3008);
  auto* big = static_cast<char*>(arena.Allocate(size_t{70} << 20));  // past a chunk: a chunk of its own
  if (kMapsPages) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(big) % kHugePageBytes, 0u);
  }
  std::memset(a, 1, 1000), std::memset(b, 2, 3000), std::memset(big, 3, size_t{70} << 20);
  EXPECT_EQ(a[999], 1);
  EXPECT_EQ(b[0], 2);
  EXPECT_EQ(big[(size_t{70} << 20) - 1], 3);
}

// Two matrices repacked into one arena: the same codes and scales as each
// repacked on its own, the second placed after the first, the same outputs.
TEST(StreamedMemory, RepacksInAnArenaComputeTheSameProducts) {
  std::mt19937 rng(21);
  const auto arena = std::make_shared<StreamedArena>();
  const int rows = 70, cols = 256;
  std::vector<float> x = test::RandVec(rng, cols);
  QActs acts;
  QuantizeActs(x.data(), 1, cols, &acts);
  const int8_t* last_end = nullptr;
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0}) {
    std::vector<uint8_t> data(RowBytes(type, cols) * rows);
    for (int r = 0; r < rows; ++r)
      QuantizeRow(type, test::RandVec(rng, cols).data(), data.data() + RowBytes(type, cols) * r, cols);
    const WeightView w{type, data.data(), rows, cols};
    const PackedWeights own = PackWeights(w), in_arena = PackWeights(w, arena);
    ASSERT_EQ(own.codes.size(), in_arena.codes.size());
    EXPECT_EQ(std::memcmp(own.codes.data(), in_arena.codes.data(), own.codes.size()), 0);
    ASSERT_EQ(own.scales.size(), in_arena.scales.size());
    EXPECT_EQ(std::memcmp(own.scales.data(), in_arena.scales.data(), own.scales.size() * sizeof(float)), 0);
    EXPECT_EQ(in_arena.codes.get_allocator().arena, arena);
    if (last_end) {
      EXPECT_GE(in_arena.codes.data(), last_end);  // after the first matrix's arrays
    }
    last_end = in_arena.codes.data() + in_arena.codes.size();
    std::vector<float> y_own(rows), y_arena(rows);
    PackedGemmRows(own, acts, 0, rows, y_own.data(), rows);
    PackedGemmRows(in_arena, acts, 0, rows, y_arena.data(), rows);
    EXPECT_EQ(std::memcmp(y_own.data(), y_arena.data(), rows * sizeof(float)), 0);
  }
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::kernels
