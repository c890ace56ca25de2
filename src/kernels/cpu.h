// Which SIMD path the dispatched kernels (qgemm) run: AVX2 where the CPU has
// it (faster than the AVX-512 kernels on Zen 4, measured), else scalar; the
// environment variable KVTRIM_KERNELS=scalar|avx2|avx512 (read once) or
// SetKernelPath picks another, clamped to what the CPU has (the tests run
// every path on one machine this way).
#pragma once

namespace kvtrim::kernels {

enum class KernelPath { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

const char* KernelPathName(KernelPath p);
// The best path this CPU (and this build) supports.
KernelPath BestKernelPath();
// The path in use.
KernelPath ActiveKernelPath();
// Asks for path p (clamped to BestKernelPath()); returns the previous one.
KernelPath SetKernelPath(KernelPath p);
// True once a path was asked for (KVTRIM_KERNELS set, or SetKernelPath called):
// kernels that choose their own default path (qgemm_packed.h) then follow it.
bool KernelPathForced();

}  // namespace kvtrim::kernels
