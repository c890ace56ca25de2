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

}  // namespace kvtrim::io
