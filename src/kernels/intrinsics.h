// <immintrin.h> for every file of ours that uses x86 intrinsics, included
// with GCC 12's false positive silenced. Its intrinsics write their unused
// pass-through operands as `__m512 __Y = __Y;` (_mm512_undefined_*), and
// inlined into a caller GCC 12 warns "'__Y' may be used uninitialized"
// inside avx512fintrin.h (GCC bug 105593, fixed in GCC 13). A diagnostic
// pragma applies to the lines it encloses, so the header's first inclusion
// in a translation unit has to be inside one: the library is built in
// unity batches (CMakeLists.txt), where any file of a batch may be the
// first to include the header, so every file includes it through here.
// KVTRIM_QUIET_GCC12_BEGIN / _END enclose such an inclusion (Eigen's
// headers too: kv/numerics/eigen.h).
#pragma once
#if !defined(__clang__)  // -Wmaybe-uninitialized is a GCC-only group
#define KVTRIM_QUIET_GCC12_BEGIN                                    \
  _Pragma("GCC diagnostic push")                                    \
  _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")       \
  _Pragma("GCC diagnostic ignored \"-Wuninitialized\"")
#else
#define KVTRIM_QUIET_GCC12_BEGIN \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wuninitialized\"")
#endif
#define KVTRIM_QUIET_GCC12_END _Pragma("GCC diagnostic pop")

#if defined(__x86_64__) || defined(__i386__)
KVTRIM_QUIET_GCC12_BEGIN
#include <immintrin.h>
KVTRIM_QUIET_GCC12_END
#endif
