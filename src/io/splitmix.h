// splitmix64 (Steele, Lea and Flood, 2014): one 64-bit step of a fully
// specified generator, so a seed gives the same numbers on every platform
// and standard library (std's distributions are not portable). Written by
// hand: a few lines, and no Debian library pins this exact sequence.
#pragma once
#include <cstdint>

namespace kvtrim::io {

inline uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The finalizer as a hash: the step from state z, z unchanged (a seed mixed
// with a layer, a head, a position...).
inline uint64_t Mix64(uint64_t z) { return SplitMix64(z); }

// A uniform double in (0, 1) from the top 53 bits of one step (never 0 or
// 1, so its logarithm is finite).
inline double Uniform01(uint64_t& state) {
  return (static_cast<double>(SplitMix64(state) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

}  // namespace kvtrim::io
