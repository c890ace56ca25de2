// The instruction-set targets of the kernels compiled for more than one CPU
// and chosen at run time (kernels/cpu.h): one definition each, for every
// file that has such kernels. KVTRIM_X86 is set where they exist (x86-64
// with GCC or Clang); elsewhere only the scalar paths are built.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define KVTRIM_X86 1
#define KVTRIM_T_AVX2 __attribute__((target("avx2,fma,f16c")))
#define KVTRIM_T_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
// AVX-512 with the bf16 dot product (vdpbf16ps): Zen 4, Sapphire Rapids.
#define KVTRIM_T_AVX512_BF16 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512bf16")))
#endif
