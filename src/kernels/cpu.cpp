#include "kernels/cpu.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

namespace kvtrim::kernels {
namespace {

#if defined(__x86_64__) && defined(__GNUC__)
// F16C from CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports
// does not know "f16c".
bool HasF16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
}
#endif

KernelPath Detect() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && HasF16c();
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  return avx512 ? KernelPath::kAvx512 : avx2 ? KernelPath::kAvx2 : KernelPath::kScalar;
#else
  return KernelPath::kScalar;
#endif
}

// The environment is read once, at the first kernel call (not in a constructor).
// Without it the AVX2 kernels run even where AVX-512 VNNI exists: on the Zen 4
// machines here (512-bit operations issued as two 256-bit halves) they
// measured 5-15% faster (docs/kernels.md); KVTRIM_KERNELS=avx512 selects the
// AVX-512 kernels.
KernelPath FromEnv(KernelPath best) {
  const char* e = std::getenv("KVTRIM_KERNELS");
  if (!e) return std::min(best, KernelPath::kAvx2);
  KernelPath want = best;
  if (!std::strcmp(e, "scalar")) want = KernelPath::kScalar;
  else if (!std::strcmp(e, "avx2")) want = KernelPath::kAvx2;
  else if (!std::strcmp(e, "avx512")) want = KernelPath::kAvx512;
  return std::min(want, best);
}

std::atomic<bool>& Forced() {
  static std::atomic<bool> f{std::getenv("KVTRIM_KERNELS") != nullptr};
  return f;
}

std::atomic<int>& Active() {
  static std::atomic<int> a{static_cast<int>(FromEnv(BestKernelPath()))};
  return a;
}

}  // namespace

const char* KernelPathName(KernelPath p) {
  switch (p) {
    case KernelPath::kScalar: return "scalar";
    case KernelPath::kAvx2: return "avx2";
    case KernelPath::kAvx512: return "avx512-vnni";
  }
  return "?";
}

KernelPath BestKernelPath() {
  static const KernelPath best = Detect();
  return best;
}

bool KernelPathForced() { return Forced().load(std::memory_order_relaxed); }

KernelPath ActiveKernelPath() { return static_cast<KernelPath>(Active().load(std::memory_order_relaxed)); }

KernelPath SetKernelPath(KernelPath p) {
  Forced().store(true, std::memory_order_relaxed);
  return static_cast<KernelPath>(Active().exchange(static_cast<int>(std::min(p, BestKernelPath()))));
}

}  // namespace kvtrim::kernels
