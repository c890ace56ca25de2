// Which SIMD path the dispatched kernels (qgemm) run: detected once from the
// CPU, lowered (never raised past what the CPU has) by the environment
// variable KVTRIM_KERNELS=scalar|avx2|avx512 or by SetKernelPath (tests run
// every path on one machine this way).
#pragma once

namespace kvtrim::kernels {

enum class KernelPath { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

const char* KernelPathName(KernelPath p);
// The best path this CPU (and this build) supports.
KernelPath BestKernelPath();
// The path in use: the best one, or the lower one asked for.
KernelPath ActiveKernelPath();
// Asks for path p (clamped to BestKernelPath()); returns the previous one.
KernelPath SetKernelPath(KernelPath p);

}  // namespace kvtrim::kernels
