// GGUF v2/v3 reader: memory-mapped, every length and offset checked against
// the file size. Spec: ggml/docs/gguf.md.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "io/ggml_types.h"
#include "io/mmap_file.h"
#include "kvtrim/status.h"

namespace kvtrim::io {

enum class GgufValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};

const char* GgufValueTypeName(GgufValueType t);

// Limits on untrusted files (docs/reliability.md): a header declaring more is
// refused before anything is allocated, with the limit named in the message.
// Each is far above any real model (Llama 3 405B: ~1100 tensors, ~50 keys,
// vocabularies <= 256k, BPE merges < 1M, chat templates ~10 KiB).
inline constexpr uint64_t kGgufMaxTensors = uint64_t{1} << 16;       // tensor infos
inline constexpr uint64_t kGgufMaxKv = uint64_t{1} << 16;            // metadata entries
inline constexpr uint64_t kGgufMaxNameBytes = uint64_t{1} << 16;     // a key or tensor name
inline constexpr uint64_t kGgufMaxStringBytes = uint64_t{1} << 24;   // a string value
inline constexpr uint64_t kGgufMaxArrayElems = uint64_t{1} << 22;    // one array, and all arrays together
inline constexpr uint64_t kGgufMaxTensorBytes = uint64_t{1} << 40;   // one tensor's data
inline constexpr uint64_t kGgufMaxVocab = uint64_t{1} << 21;         // tokens (model/config, tokenizer)

struct GgufValue;
using GgufArray = std::vector<GgufValue>;

// One metadata value. Integers are widened to int64/uint64, floats to double;
// `type` keeps the on-disk type. Arrays may nest.
struct GgufValue {
  GgufValueType type = GgufValueType::U8;
  std::variant<uint64_t, int64_t, double, bool, std::string, GgufArray> v;
  GgufValueType elem_type = GgufValueType::U8;  // arrays only

  bool is_int() const;
  bool is_float() const { return type == GgufValueType::F32 || type == GgufValueType::F64; }
  int64_t as_int() const;  // any integer type
  double as_float() const;  // float or integer
  std::string ToString(size_t max_elems = 8) const;  // for `inspect`
};

struct GgufTensorInfo {
  std::string name;
  std::vector<uint64_t> shape;  // ne[0] is the contiguous (row) dimension
  GgmlType type = GgmlType::F32;
  uint64_t offset = 0;  // relative to the data section
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;  // points into the mapping
};

class Cursor;  // bounds-checked reader (gguf.cpp)

class GgufFile {
 public:
  static Expected<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // Parse an in-memory image (tests use corrupted copies).
  static Expected<std::unique_ptr<GgufFile>> FromBytes(std::string bytes);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  size_t file_size() const { return file_->size(); }
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

  // Drops the resident pages of [p, p + n) of the mapped file (MappedFile::Release).
  size_t ReleasePages(const uint8_t* p, size_t n) const { return file_->Release(p, n); }

  const GgufValue* Find(const std::string& key) const;
  const GgufTensorInfo* FindTensor(const std::string& name) const;

  // Typed getters with clear errors ("missing key", "wrong type").
  Expected<int64_t> GetInt(const std::string& key) const;
  Expected<double> GetFloat(const std::string& key) const;
  Expected<std::string> GetString(const std::string& key) const;
  Expected<bool> GetBool(const std::string& key) const;
  Expected<const GgufArray*> GetArray(const std::string& key, GgufValueType elem) const;

 private:
  static Expected<std::unique_ptr<GgufFile>> Parse(std::unique_ptr<MappedFile> f);
  Status ParseMetadata(Cursor& c, uint64_t n_kv);
  Status ParseTensorInfos(Cursor& c, uint64_t n_tensors);
  std::unique_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::map<std::string, size_t> kv_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

}  // namespace kvtrim::io
