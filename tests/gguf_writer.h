// A small GGUF v3 writer for tests: synthetic files with every metadata type,
// nested arrays, a chosen alignment, and re-typed copies of real models.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "io/gguf.h"

namespace kvtrim::test {

class GgufWriter {
 public:
  explicit GgufWriter(uint64_t alignment = 32) : alignment_(alignment) {}

  // Appends one metadata entry whose value is already encoded (type + payload).
  void AddRaw(const std::string& key, uint32_t type, const std::string& payload) {
    kv_ += Str(key) + U32(type) + payload;
    ++n_kv_;
  }
  // Encodes a parsed value back to its on-disk form (arrays recurse).
  static std::string Encode(const io::GgufValue& v) {
    using T = io::GgufValueType;
    switch (v.type) {
      case T::U8: return Pod<uint8_t>(static_cast<uint8_t>(v.as_int()));
      case T::I8: return Pod<int8_t>(static_cast<int8_t>(v.as_int()));
      case T::U16: return Pod<uint16_t>(static_cast<uint16_t>(v.as_int()));
      case T::I16: return Pod<int16_t>(static_cast<int16_t>(v.as_int()));
      case T::U32: return Pod<uint32_t>(static_cast<uint32_t>(v.as_int()));
      case T::I32: return Pod<int32_t>(static_cast<int32_t>(v.as_int()));
      case T::U64: return Pod<uint64_t>(static_cast<uint64_t>(v.as_int()));
      case T::I64: return Pod<int64_t>(v.as_int());
      case T::F32: return Pod<float>(static_cast<float>(v.as_float()));
      case T::F64: return Pod<double>(v.as_float());
      case T::BOOL: return Pod<uint8_t>(std::get<bool>(v.v) ? 1 : 0);
      case T::STRING: return Str(std::get<std::string>(v.v));
      case T::ARRAY: {
        const auto& a = std::get<io::GgufArray>(v.v);
        std::string out = U32(static_cast<uint32_t>(v.elem_type)) + Pod<uint64_t>(a.size());
        for (const auto& e : a) out += Encode(e);
        return out;
      }
    }
    return {};
  }
  void AddValue(const std::string& key, const io::GgufValue& v) { AddRaw(key, static_cast<uint32_t>(v.type), Encode(v)); }

  void AddTensor(const std::string& name, const std::vector<uint64_t>& shape, GgmlType type, const std::string& data) {
    while (data_.size() % alignment_) data_ += '\0';
    infos_ += Str(name) + U32(static_cast<uint32_t>(shape.size()));
    for (uint64_t d : shape) infos_ += Pod<uint64_t>(d);
    infos_ += U32(static_cast<uint32_t>(type)) + Pod<uint64_t>(data_.size());
    data_ += data;
    ++n_tensors_;
  }

  std::string Bytes() const {
    std::string out = "GGUF" + U32(3) + Pod<uint64_t>(n_tensors_) + Pod<uint64_t>(n_kv_) + kv_ + infos_;
    while (out.size() % alignment_) out += '\0';
    return out + data_;
  }

  template <typename T>
  static std::string Pod(T x) {
    std::string s(sizeof(T), '\0');
    std::memcpy(s.data(), &x, sizeof(T));
    return s;
  }
  static std::string U32(uint32_t x) { return Pod(x); }
  static std::string Str(const std::string& s) { return Pod<uint64_t>(s.size()) + s; }

 private:
  uint64_t alignment_;
  uint64_t n_kv_ = 0, n_tensors_ = 0;
  std::string kv_, infos_, data_;
};

}  // namespace kvtrim::test
