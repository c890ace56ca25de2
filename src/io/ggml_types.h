// ggml tensor type ids and block layouts (the GGUF tensor data types we read).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace kvtrim {

enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  BF16 = 30,
};

constexpr int kQK = 32;    // elements per Q8_0 / Q4_0 / Q4_1 / Q5_0 / Q5_1 block
constexpr int kQKK = 256;  // elements per K-quant super-block (Q2_K .. Q6_K)

struct TypeTraits {
  const char* name;
  size_t block_elems;  // elements per block
  size_t block_bytes;  // bytes per block
};

// Traits of a supported type, or nullptr for an unsupported id.
inline const TypeTraits* GetTypeTraits(uint32_t id) {
  static const TypeTraits f32{"F32", 1, 4}, f16{"F16", 1, 2}, q40{"Q4_0", 32, 18},
      q80{"Q8_0", 32, 34}, bf16{"BF16", 1, 2}, q41{"Q4_1", 32, 20}, q50{"Q5_0", 32, 22},
      q51{"Q5_1", 32, 24}, q2k{"Q2_K", 256, 84}, q3k{"Q3_K", 256, 110}, q4k{"Q4_K", 256, 144},
      q5k{"Q5_K", 256, 176}, q6k{"Q6_K", 256, 210};
  switch (id) {
    case 0: return &f32;
    case 1: return &f16;
    case 2: return &q40;
    case 3: return &q41;
    case 6: return &q50;
    case 7: return &q51;
    case 8: return &q80;
    case 10: return &q2k;
    case 11: return &q3k;
    case 12: return &q4k;
    case 13: return &q5k;
    case 14: return &q6k;
    case 30: return &bf16;
    default: return nullptr;
  }
}

// Name of any ggml type id (also the ones we refuse), for error messages.
inline std::string GgmlTypeIdName(uint32_t id) {
  static const char* const kNames[] = {"F32", "F16", "Q4_0", "Q4_1", "Q4_2", "Q4_3", "Q5_0", "Q5_1", "Q8_0",
                                       "Q8_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS",
                                       "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS",
                                       "I8", "I16", "I32", "I64", "F64", "IQ1_M", "BF16", "Q4_0_4_4",
                                       "Q4_0_4_8", "Q4_0_8_8", "TQ1_0", "TQ2_0"};
  if (id < sizeof(kNames) / sizeof(kNames[0])) return kNames[id];
  return "type#" + std::to_string(id);
}

inline std::string TypeName(GgmlType t) {
  const TypeTraits* tt = GetTypeTraits(static_cast<uint32_t>(t));
  return tt ? tt->name : "type#" + std::to_string(static_cast<uint32_t>(t));
}

// Bytes of one row of n elements (n must be a multiple of the block size).
inline size_t RowBytes(GgmlType t, size_t n) {
  const TypeTraits* tt = GetTypeTraits(static_cast<uint32_t>(t));
  return n / tt->block_elems * tt->block_bytes;
}

}  // namespace kvtrim
