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
  Q8_0 = 8,
  BF16 = 30,
};

constexpr int kQK = 32;  // elements per Q8_0 / Q4_0 block

struct TypeTraits {
  const char* name;
  size_t block_elems;  // elements per block
  size_t block_bytes;  // bytes per block
};

// Traits of a supported type, or nullptr for an unsupported id.
inline const TypeTraits* GetTypeTraits(uint32_t id) {
  static const TypeTraits f32{"F32", 1, 4}, f16{"F16", 1, 2}, q40{"Q4_0", 32, 18},
      q80{"Q8_0", 32, 34}, bf16{"BF16", 1, 2};
  switch (id) {
    case 0: return &f32;
    case 1: return &f16;
    case 2: return &q40;
    case 8: return &q80;
    case 30: return &bf16;
    default: return nullptr;
  }
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
