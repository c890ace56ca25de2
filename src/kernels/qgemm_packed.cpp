#include "kernels/qgemm_packed.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "kernels/quant.h"

#include "kernels/targets.h"

namespace kvtrim::kernels {
namespace {

constexpr int kPackedBlk = 32;
constexpr int kPairs = kPackedBlk / 2;
constexpr size_t kGroupBytes = kPackRows * 2;         // one pair of codes of 16 rows
constexpr size_t kBlockBytes = kPairs * kGroupBytes;  // one block of 16 rows: 512 bytes
constexpr size_t kNibBlockBytes = kBlockBytes / 2;   // the same in 4-bit codes: 256 bytes

size_t BlockBytes(const PackedWeights& p) { return p.nibbles ? kNibBlockBytes : kBlockBytes; }

// Code j of a stored Q8_0/Q4_0 block.
int8_t CodeAt(bool q4, const uint8_t* blk, int j) {
  if (!q4) return static_cast<int8_t>(blk[2 + j]);
  return static_cast<int8_t>((j < 16 ? blk[2 + j] & 0xF : blk[2 + j - 16] >> 4) - 8);
}

// The operands of one micro-kernel call: up to two consecutive row tiles
// (AVX2: one half tile of 8 rows) times up to 8 consecutive tokens.
struct Tile {
  const int8_t* codes = nullptr;  // the first tile's block 0
  const float* scales = nullptr;
  size_t tile_codes = 0, tile_scales = 0;  // strides between consecutive tiles
  const int16_t* x = nullptr;   // the first token's codes
  const float* dx = nullptr;    // the first token's block scales
  const int32_t* hs = nullptr;  // the first token's half-block code sums (QActs::hsum)
  int nb = 0;                  // blocks per row and per token
  float* y = nullptr;          // row 16 * (first tile), first token
  int ldy = 0;
  uint32_t mask[2] = {0, 0};  // rows of each tile to write (bit i: row i)
};

// One tile x one token, element by element over the repacked layout.
void MicroScalar(const Tile& k, int ntok, bool nib) {
  const size_t ldx = static_cast<size_t>(k.nb) * kPackedBlk;
  for (int t = 0; t < ntok; ++t) {
    float acc[kPackRows] = {};
    for (int b = 0; b < k.nb; ++b) {
      int32_t s[kPackRows] = {};
      const int16_t* xb = k.x + ldx * t + kPackedBlk * b;
      if (nib) {
        const auto* c = reinterpret_cast<const uint8_t*>(k.codes) + kNibBlockBytes * b;
        for (int p = 0; p < kPairs; ++p)
          for (int i = 0; i < kPackRows; ++i)
            for (int e = 0; e < 2; ++e) {
              const uint8_t byte = c[kGroupBytes * (p % 8) + 2 * i + e];
              s[i] += ((p < 8 ? byte & 0xF : byte >> 4) - 8) * int32_t{xb[2 * p + e]};
            }
      } else {
        const int8_t* c = k.codes + kBlockBytes * b;
        for (int p = 0; p < kPairs; ++p)
          for (int i = 0; i < kPackRows; ++i)
            s[i] += int32_t{c[kGroupBytes * p + 2 * i]} * xb[2 * p] + int32_t{c[kGroupBytes * p + 2 * i + 1]} * xb[2 * p + 1];
      }
      const float dx = k.dx[static_cast<size_t>(t) * k.nb + b];
      for (int i = 0; i < kPackRows; ++i) acc[i] += static_cast<float>(s[i]) * (k.scales[kPackRows * b + i] * dx);
    }
    for (int i = 0; i < kPackRows; ++i)
      if (k.mask[0] >> i & 1u) k.y[static_cast<size_t>(t) * k.ldy + i] = acc[i];
  }
}

#ifdef KVTRIM_X86

inline int32_t PairAt(const int16_t* x) {
  int32_t v;
  std::memcpy(&v, x, 4);
  return v;
}

// NV tiles of 16 rows (one zmm each) x NT tokens: per block 16 vpdpwssd per
// (tile, token) into int32, then one convert and one multiply-add.
// NIB: 4-bit codes (Q4_0), two pairs per 32-byte group, unsigned; 8 x the
// token's block code sum is subtracted from the int32 sums.
template <int NV, int NT, bool NIB>
KVTRIM_T_AVX512 void MicroAvx512(const Tile& k) {
  const size_t ldx = static_cast<size_t>(k.nb) * kPackedBlk;
  __m512 acc[NV][NT];
  for (int v = 0; v < NV; ++v)
    for (int t = 0; t < NT; ++t) acc[v][t] = _mm512_setzero_ps();
  for (int b = 0; b < k.nb; ++b) {
    __m512i s[NV][NT];
    for (int v = 0; v < NV; ++v)
      for (int t = 0; t < NT; ++t) s[v][t] = _mm512_setzero_si512();
    const int16_t* xb = k.x + kPackedBlk * b;
    if constexpr (NIB) {
      const int8_t* c = k.codes + kNibBlockBytes * b;
      const __m256i m4 = _mm256_set1_epi8(0xF);
#pragma GCC unroll 8
      for (int g = 0; g < kPairs / 2; ++g) {
        __m512i wl[NV], wh[NV];
        for (int v = 0; v < NV; ++v) {
          const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + k.tile_codes * v + kGroupBytes * g));
          wl[v] = _mm512_cvtepu8_epi16(_mm256_and_si256(raw, m4));
          wh[v] = _mm512_cvtepu8_epi16(_mm256_and_si256(_mm256_srli_epi16(raw, 4), m4));
        }
        for (int t = 0; t < NT; ++t) {
          const __m512i xl = _mm512_set1_epi32(PairAt(xb + ldx * t + 2 * g));
          const __m512i xh = _mm512_set1_epi32(PairAt(xb + ldx * t + 2 * g + 16));
          for (int v = 0; v < NV; ++v) s[v][t] = _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(s[v][t], wl[v], xl), wh[v], xh);
        }
      }
      for (int t = 0; t < NT; ++t) {
        const int32_t* h = k.hs + static_cast<size_t>(t) * 2 * k.nb + 2 * b;
        const __m512i off = _mm512_set1_epi32(8 * (h[0] + h[1]));
        for (int v = 0; v < NV; ++v) s[v][t] = _mm512_sub_epi32(s[v][t], off);
      }
    } else {
      const int8_t* c = k.codes + kBlockBytes * b;
#pragma GCC unroll 16
      for (int p = 0; p < kPairs; ++p) {
        __m512i w[NV];
        for (int v = 0; v < NV; ++v)
          w[v] = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + k.tile_codes * v + kGroupBytes * p)));
        for (int t = 0; t < NT; ++t) {
          const __m512i xv = _mm512_set1_epi32(PairAt(xb + ldx * t + 2 * p));
          for (int v = 0; v < NV; ++v) s[v][t] = _mm512_dpwssd_epi32(s[v][t], w[v], xv);
        }
      }
    }
    for (int v = 0; v < NV; ++v) {
      const __m512 dw = _mm512_loadu_ps(k.scales + k.tile_scales * v + kPackRows * b);
      for (int t = 0; t < NT; ++t) {
        const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(k.dx[static_cast<size_t>(t) * k.nb + b]));
        acc[v][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[v][t]), d, acc[v][t]);
      }
    }
  }
  for (int v = 0; v < NV; ++v)
    for (int t = 0; t < NT; ++t)
      _mm512_mask_storeu_ps(k.y + static_cast<size_t>(t) * k.ldy + kPackRows * v, static_cast<__mmask16>(k.mask[v]),
                            acc[v][t]);
}

// Half tile h (rows 8h..8h+7, one ymm) x NT tokens: per block 16
// (madd_epi16 + add) per token, then one convert and one multiply-add.
template <int NT, bool NIB>
KVTRIM_T_AVX2 void MicroAvx2Half(const Tile& k, int h) {
  const size_t ldx = static_cast<size_t>(k.nb) * kPackedBlk;
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int b = 0; b < k.nb; ++b) {
    __m256i s[NT];
    for (int t = 0; t < NT; ++t) s[t] = _mm256_setzero_si256();
    const int16_t* xb = k.x + kPackedBlk * b;
    if constexpr (NIB) {
      const int8_t* c = k.codes + kNibBlockBytes * b + 16 * h;
      const __m128i m4 = _mm_set1_epi8(0xF);
#pragma GCC unroll 8
      for (int g = 0; g < kPairs / 2; ++g) {
        const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(c + kGroupBytes * g));
        const __m256i wl = _mm256_cvtepu8_epi16(_mm_and_si128(raw, m4));
        const __m256i wh = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), m4));
        for (int t = 0; t < NT; ++t) {
          const __m256i xl = _mm256_set1_epi32(PairAt(xb + ldx * t + 2 * g));
          const __m256i xh = _mm256_set1_epi32(PairAt(xb + ldx * t + 2 * g + 16));
          s[t] = _mm256_add_epi32(s[t], _mm256_add_epi32(_mm256_madd_epi16(wl, xl), _mm256_madd_epi16(wh, xh)));
        }
      }
      for (int t = 0; t < NT; ++t) {
        const int32_t* hh = k.hs + static_cast<size_t>(t) * 2 * k.nb + 2 * b;
        s[t] = _mm256_sub_epi32(s[t], _mm256_set1_epi32(8 * (hh[0] + hh[1])));
      }
    } else {
      const int8_t* c = k.codes + kBlockBytes * b + 16 * h;
#pragma GCC unroll 16
      for (int p = 0; p < kPairs; ++p) {
        const __m256i w = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c + kGroupBytes * p)));
        for (int t = 0; t < NT; ++t) {
          const __m256i xv = _mm256_set1_epi32(PairAt(xb + ldx * t + 2 * p));
          s[t] = _mm256_add_epi32(s[t], _mm256_madd_epi16(w, xv));
        }
      }
    }
    const __m256 dw = _mm256_loadu_ps(k.scales + kPackRows * b + 8 * h);
    for (int t = 0; t < NT; ++t) {
      const __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(k.dx[static_cast<size_t>(t) * k.nb + b]));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[t]), d, acc[t]);
    }
  }
  const uint32_t m = k.mask[0] >> (8 * h) & 0xFFu;
  for (int t = 0; t < NT; ++t) {
    float* yo = k.y + static_cast<size_t>(t) * k.ldy + 8 * h;
    if (m == 0xFFu) {
      _mm256_storeu_ps(yo, acc[t]);
      continue;
    }
    alignas(32) float tmp[8];
    _mm256_store_ps(tmp, acc[t]);
    for (int i = 0; i < 8; ++i)
      if (m >> i & 1u) yo[i] = tmp[i];
  }
}

template <int NT, bool NIB>
KVTRIM_T_AVX2 void MicroAvx2(const Tile& k) {
  if (k.mask[0] & 0xFFu) MicroAvx2Half<NT, NIB>(k, 0);
  if (k.mask[0] >> 8) MicroAvx2Half<NT, NIB>(k, 1);
}

using Micro = void (*)(const Tile&);

// Register tiles (measured, docs/kernels.md): AVX-512 2 tiles (32 rows) x 4
// tokens, AVX2 8 rows x 4 tokens.
constexpr int kNv512 = 2, kNt512 = 4, kNtAvx2 = 4;
constexpr int kTokenBlock = 64;  // a multiple of every token tile

template <int NV, bool NIB, int... N>
constexpr std::array<Micro, sizeof...(N)> Avx512Table(std::integer_sequence<int, N...>) {
  return {&MicroAvx512<NV, N + 1, NIB>...};
}
template <bool NIB, int... N>
constexpr std::array<Micro, sizeof...(N)> Avx2Table(std::integer_sequence<int, N...>) {
  return {&MicroAvx2<N + 1, NIB>...};
}

#endif  // KVTRIM_X86

// Rows of tile tl in [r0, r1) as a bit mask.
uint32_t RowMask(int tl, int r0, int r1) {
  const int lo = std::max(r0, kPackRows * tl) - kPackRows * tl, hi = std::min(r1, kPackRows * (tl + 1)) - kPackRows * tl;
  return hi > lo ? ((1u << (hi - lo)) - 1u) << lo : 0u;
}

// Walks the row tiles covering [r0, r1) in groups of nv_max (the weights of a
// group stay in cache for every token), the tokens in groups of up to nt_max;
// micro(nv, nt) returns the kernel for nv tiles x nt tokens.
template <class MicroFor>
void Drive(const PackedWeights& p, const QActs& a, int r0, int r1, float* y, int ldy, int nv_max, int nt_max,
           MicroFor micro) {
  const int tile1 = (r1 + kPackRows - 1) / kPackRows;
  const size_t tile_codes = BlockBytes(p) * p.nb, tile_scales = static_cast<size_t>(kPackRows) * p.nb;
  // Tokens in blocks of kTokenBlock (their activations stay in L1/L2 while
  // every row tile passes over them; the outputs of a block stay in cache).
  for (int t0 = 0; t0 < a.T; t0 += kTokenBlock) {
    const int t1 = std::min(a.T, t0 + kTokenBlock);
    for (int tl = r0 / kPackRows; tl < tile1; tl += nv_max) {
      const int nv = std::min(nv_max, tile1 - tl);
      Tile k;
      k.codes = p.codes.data() + tile_codes * tl;
      k.scales = p.scales.data() + tile_scales * tl;
      k.tile_codes = tile_codes;
      k.tile_scales = tile_scales;
      k.nb = p.nb;
      k.ldy = ldy;
      for (int v = 0; v < nv; ++v) k.mask[v] = RowMask(tl + v, r0, r1);
      for (int t = t0; t < t1; t += nt_max) {
        const int nt = std::min(nt_max, t1 - t);
        k.x = a.q.data() + static_cast<size_t>(t) * p.nb * kPackedBlk;
        k.dx = a.d.data() + static_cast<size_t>(t) * p.nb;
        k.hs = a.hsum.data() + static_cast<size_t>(t) * 2 * p.nb;
        k.y = y + static_cast<size_t>(t) * ldy + static_cast<size_t>(kPackRows) * tl;
        micro(nv, nt, k);
      }
    }
  }
}

}  // namespace

bool PackSupports(const WeightView& w) {
  return (w.type == GgmlType::Q8_0 || w.type == GgmlType::Q4_0) && w.cols > 0 && w.cols % kPackedBlk == 0 && w.rows > 0;
}

PackedWeights PackWeights(const WeightView& w, const std::shared_ptr<StreamedArena>& arena) {
  PackedWeights p;
  if (!PackSupports(w)) return p;
  p.codes = StreamedVector<int8_t>(StreamedAllocator<int8_t>(arena));
  p.scales = StreamedVector<float>(StreamedAllocator<float>(arena));
  const bool q4 = w.type == GgmlType::Q4_0;
  const size_t bb = q4 ? 18 : 34;
  p.type = w.type;
  p.rows = w.rows;
  p.cols = w.cols;
  p.nb = w.cols / kPackedBlk;
  p.tiles = (w.rows + kPackRows - 1) / kPackRows;
  p.nibbles = q4;
  p.codes.assign(BlockBytes(p) * p.nb * p.tiles, q4 ? static_cast<int8_t>(0x88) : int8_t{0});  // code 0 in padding
  p.scales.assign(static_cast<size_t>(kPackRows) * p.nb * p.tiles, 0.f);
  for (int r = 0; r < w.rows; ++r) {
    const int tl = r / kPackRows, i = r % kPackRows;
    for (int b = 0; b < p.nb; ++b) {
      const uint8_t* blk = w.row(r) + bb * b;
      const size_t blk_index = static_cast<size_t>(tl) * p.nb + b;
      uint16_t h;
      std::memcpy(&h, blk, 2);
      p.scales[blk_index * kPackRows + i] = F16ToF32(h);
      int8_t* c = p.codes.data() + blk_index * BlockBytes(p) + 2 * i;
      if (!q4) {
        for (int j = 0; j < kPackedBlk; ++j) c[kGroupBytes * (j / 2) + j % 2] = CodeAt(q4, blk, j);
        continue;
      }
      for (int j = 0; j < kPackedBlk / 2; ++j) {  // element j: low nibble of group j / 2; element j + 16: high
        const int lo = CodeAt(q4, blk, j) + 8, hi = CodeAt(q4, blk, j + 16) + 8;
        c[kGroupBytes * (j / 2) + j % 2] = static_cast<int8_t>(lo | hi << 4);
      }
    }
  }
  return p;
}

void UnpackBlock(const PackedWeights& p, int r, int b, int8_t* codes, float* d) {
  const size_t blk_index = static_cast<size_t>(r / kPackRows) * p.nb + b;
  const int i = r % kPackRows;
  *d = p.scales[blk_index * kPackRows + i];
  const int8_t* c = p.codes.data() + blk_index * BlockBytes(p) + 2 * i;
  if (!p.nibbles) {
    for (int j = 0; j < kPackedBlk; ++j) codes[j] = c[kGroupBytes * (j / 2) + j % 2];
    return;
  }
  for (int j = 0; j < kPackedBlk / 2; ++j) {
    const auto byte = static_cast<uint8_t>(c[kGroupBytes * (j / 2) + j % 2]);
    codes[j] = static_cast<int8_t>((byte & 0xF) - 8);
    codes[j + 16] = static_cast<int8_t>((byte >> 4) - 8);
  }
}

KernelPath PackedKernelPath() { return KernelPathForced() ? ActiveKernelPath() : BestKernelPath(); }

void PackedGemmRows(const PackedWeights& p, const QActs& a, int r0, int r1, float* y, int ldy) {
  if (r0 >= r1 || a.T <= 0) return;
  const KernelPath path = PackedKernelPath();
#ifdef KVTRIM_X86
  if (path == KernelPath::kAvx512) {
    using Seq = std::make_integer_sequence<int, kNt512>;
    static constexpr auto t1 = Avx512Table<1, false>(Seq{}), t2 = Avx512Table<kNv512, false>(Seq{});
    static constexpr auto n1 = Avx512Table<1, true>(Seq{}), n2 = Avx512Table<kNv512, true>(Seq{});
    if (p.nibbles)
      return Drive(p, a, r0, r1, y, ldy, kNv512, kNt512,
                   [](int nv, int nt, const Tile& k) { (nv == kNv512 ? n2 : n1)[nt - 1](k); });
    return Drive(p, a, r0, r1, y, ldy, kNv512, kNt512,
                 [](int nv, int nt, const Tile& k) { (nv == kNv512 ? t2 : t1)[nt - 1](k); });
  }
  if (path == KernelPath::kAvx2) {
    using Seq = std::make_integer_sequence<int, kNtAvx2>;
    static constexpr auto t = Avx2Table<false>(Seq{}), n = Avx2Table<true>(Seq{});
    const auto& tab = p.nibbles ? n : t;
    return Drive(p, a, r0, r1, y, ldy, 1, kNtAvx2, [&tab](int, int nt, const Tile& k) { tab[nt - 1](k); });
  }
#endif
  (void)path;
  const bool nib = p.nibbles;
  Drive(p, a, r0, r1, y, ldy, 1, 1, [nib](int, int nt, const Tile& k) { MicroScalar(k, nt, nib); });
}

}  // namespace kvtrim::kernels
