// The instruction-set targets of the kernels compiled for more than one CPU
// and chosen at run time (kernels/cpu.h): one definition each, for every
// file that has such kernels. KVTRIM_X86 is set where they exist (x86-64
// with GCC or Clang); elsewhere only the scalar paths are built.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#include "kernels/intrinsics.h"
#define KVTRIM_X86 1
#define KVTRIM_T_AVX2 __attribute__((target("avx2,fma,f16c")))
#define KVTRIM_T_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
// AVX-512 with the bf16 dot product (vdpbf16ps): Zen 4, Sapphire Rapids.
#define KVTRIM_T_AVX512_BF16 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512bf16")))
#endif

// The build's own targets (KVTRIM_NATIVE, the default, compiles for the build
// machine's CPU): kernels written for one instruction set only, chosen when
// their file is compiled. One definition each, for every file that has such
// kernels.
#if defined(__AVX2__) && defined(__FMA__)
#include "kernels/intrinsics.h"
#define KVTRIM_BUILD_AVX2_FMA 1
#endif
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define KVTRIM_BUILD_AVX2_F16C 1
#endif
// Sleef's vector exps (Debian libsleef-dev; KVTRIM_HAVE_SLEEF from CMake).
#if defined(__AVX2__) && defined(KVTRIM_HAVE_SLEEF)
#include "kernels/intrinsics.h"
#define KVTRIM_BUILD_AVX2_SLEEF 1
#endif
#if defined(__AVX512F__) && defined(KVTRIM_HAVE_SLEEF)
#define KVTRIM_BUILD_AVX512_SLEEF 1
#endif
