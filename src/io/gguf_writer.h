// GGUF v3 writer: metadata encoded as it is added, tensors either held in
// memory (small files, tests) or produced at write time and streamed to the
// file (models of gigabytes: `kvtrim make-model`). Spec: ggml/docs/gguf.md.
#pragma once
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "kvtrim/status.h"

namespace kvtrim::io {

class GgufWriter {
 public:
  // Receives a tensor's bytes, in order, in pieces of any size.
  using Sink = std::function<Status(const void* data, size_t n)>;
  // Writes one tensor's data (exactly its declared bytes) into the sink.
  using Producer = std::function<Status(const Sink& sink)>;
  // Called after each piece of tensor data: bytes of the file written so far, total.
  using Progress = std::function<void(uint64_t written, uint64_t total)>;

  explicit GgufWriter(uint64_t alignment = 32) : alignment_(alignment) {}

  // Appends one metadata entry whose value is already encoded (type + payload).
  void AddRaw(const std::string& key, uint32_t type, const std::string& payload);
  void AddValue(const std::string& key, const GgufValue& v) { AddRaw(key, static_cast<uint32_t>(v.type), Encode(v)); }
  void AddU32(const std::string& key, uint32_t v) { AddRaw(key, 4, Pod(v)); }
  void AddI32(const std::string& key, int32_t v) { AddRaw(key, 5, Pod(v)); }
  void AddU64(const std::string& key, uint64_t v) { AddRaw(key, 10, Pod(v)); }
  void AddF32(const std::string& key, float v) { AddRaw(key, 6, Pod(v)); }
  void AddBool(const std::string& key, bool v) { AddRaw(key, 7, Pod<uint8_t>(v ? 1 : 0)); }
  void AddString(const std::string& key, const std::string& v) { AddRaw(key, 8, Str(v)); }
  void AddStringArray(const std::string& key, const std::vector<std::string>& v);
  void AddF32Array(const std::string& key, const std::vector<float>& v);
  void AddI32Array(const std::string& key, const std::vector<int32_t>& v);

  // A tensor whose bytes are given now, written as they are (tests may give
  // a size that does not match the shape on purpose).
  void AddTensor(const std::string& name, const std::vector<uint64_t>& shape, GgmlType type, std::string data);
  // A tensor whose bytes come from `produce` at write time; its size follows
  // from the shape and type (ne[0] a multiple of the type's block size).
  Status AddTensor(const std::string& name, const std::vector<uint64_t>& shape, GgmlType type, Producer produce);

  // Bytes of the whole file (producers run; for small files).
  Expected<std::string> Build() const;
  // Build() for in-memory tensors only (tests): an empty string on an error.
  std::string Bytes() const;
  // Writes the file at `path` atomically: into `path` + ".partial", then
  // renamed over `path`; on any error the partial file is removed and
  // `path` is left as it was.
  Status WriteFile(const std::string& path, const Progress& progress = {}) const;

  uint64_t file_bytes() const;  // size of the file Build/WriteFile produce
  size_t n_tensors() const { return tensors_.size(); }

  // Encodes a parsed value back to its on-disk form (arrays recurse).
  static std::string Encode(const GgufValue& v);
  template <typename T>
  static std::string Pod(T x) {
    std::string s(sizeof(T), '\0');
    std::memcpy(s.data(), &x, sizeof(T));
    return s;
  }
  static std::string U32(uint32_t x) { return Pod(x); }
  static std::string Str(const std::string& s) { return Pod<uint64_t>(s.size()) + s; }

 private:
  struct Tensor {
    std::string name;
    std::vector<uint64_t> shape;
    GgmlType type;
    uint64_t offset, n_bytes;  // in the data section
    std::string data;          // in-memory tensors
    Producer produce;          // streamed tensors
  };
  void Append(Tensor t);
  std::string Header() const;  // everything before the data section, padded
  Status WriteData(const Sink& out) const;

  uint64_t alignment_;
  uint64_t n_kv_ = 0, data_bytes_ = 0;
  std::string kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace kvtrim::io
