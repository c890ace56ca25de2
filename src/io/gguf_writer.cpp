#include "io/gguf_writer.h"

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <system_error>

namespace kvtrim::io {

void GgufWriter::AddRaw(const std::string& key, uint32_t type, const std::string& payload) {
  kv_ += Str(key) + U32(type) + payload;
  ++n_kv_;
}

void GgufWriter::AddStringArray(const std::string& key, const std::vector<std::string>& v) {
  std::string p = U32(8) + Pod<uint64_t>(v.size());
  for (const auto& s : v) p += Str(s);
  AddRaw(key, 9, p);
}

void GgufWriter::AddF32Array(const std::string& key, const std::vector<float>& v) {
  std::string p = U32(6) + Pod<uint64_t>(v.size());
  p.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  AddRaw(key, 9, p);
}

void GgufWriter::AddI32Array(const std::string& key, const std::vector<int32_t>& v) {
  std::string p = U32(5) + Pod<uint64_t>(v.size());
  p.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(int32_t));
  AddRaw(key, 9, p);
}

std::string GgufWriter::Encode(const GgufValue& v) {
  using T = GgufValueType;
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
      const auto& a = std::get<GgufArray>(v.v);
      std::string out = U32(static_cast<uint32_t>(v.elem_type)) + Pod<uint64_t>(a.size());
      for (const auto& e : a) out += Encode(e);
      return out;
    }
  }
  return {};
}

void GgufWriter::Append(Tensor t) {
  data_bytes_ = (data_bytes_ + alignment_ - 1) / alignment_ * alignment_;
  t.offset = data_bytes_;
  data_bytes_ += t.n_bytes;
  tensors_.push_back(std::move(t));
}

void GgufWriter::AddTensor(const std::string& name, const std::vector<uint64_t>& shape, GgmlType type,
                           std::string data) {
  const uint64_t n = data.size();
  Append({name, shape, type, 0, n, std::move(data), {}});
}

Status GgufWriter::AddTensor(const std::string& name, const std::vector<uint64_t>& shape, GgmlType type,
                             Producer produce) {
  const TypeTraits* tt = GetTypeTraits(static_cast<uint32_t>(type));
  if (!tt) return MakeError("tensor '" + name + "': type " + GgmlTypeIdName(static_cast<uint32_t>(type)) + " unknown");
  if (shape.empty() || shape[0] % tt->block_elems != 0) {
    return MakeError("tensor '" + name + "': first dimension is not a multiple of " + std::to_string(tt->block_elems) +
                     " (" + tt->name + " blocks)");
  }
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  Append({name, shape, type, 0, n / tt->block_elems * tt->block_bytes, {}, std::move(produce)});
  return {};
}

std::string GgufWriter::Header() const {
  std::string out = "GGUF" + U32(3) + Pod<uint64_t>(tensors_.size()) + Pod<uint64_t>(n_kv_) + kv_;
  for (const Tensor& t : tensors_) {
    out += Str(t.name) + U32(static_cast<uint32_t>(t.shape.size()));
    for (uint64_t d : t.shape) out += Pod<uint64_t>(d);
    out += U32(static_cast<uint32_t>(t.type)) + Pod<uint64_t>(t.offset);
  }
  out.resize((out.size() + alignment_ - 1) / alignment_ * alignment_, '\0');
  return out;
}

uint64_t GgufWriter::file_bytes() const { return Header().size() + data_bytes_; }

// The data section: each tensor at its offset, padding between them.
Status GgufWriter::WriteData(const Sink& out) const {
  uint64_t at = 0;
  const std::string zeros(alignment_, '\0');
  for (const Tensor& t : tensors_) {
    KVTRIM_RETURN_IF_ERROR(out(zeros.data(), t.offset - at));
    if (!t.produce) {
      KVTRIM_RETURN_IF_ERROR(out(t.data.data(), t.data.size()));
    } else {
      uint64_t got = 0;
      auto counted = [&](const void* p, size_t n) -> Status {
        if (got + n > t.n_bytes) return MakeError("tensor '" + t.name + "': producer wrote more than its size");
        got += n;
        return out(p, n);
      };
      KVTRIM_RETURN_IF_ERROR(t.produce(counted));
      if (got != t.n_bytes) {
        return MakeError("tensor '" + t.name + "': producer wrote " + std::to_string(got) + " of " +
                         std::to_string(t.n_bytes) + " bytes");
      }
    }
    at = t.offset + t.n_bytes;
  }
  return {};
}

Expected<std::string> GgufWriter::Build() const {
  std::string out = Header();
  Status st = WriteData([&](const void* p, size_t n) -> Status {
    out.append(static_cast<const char*>(p), n);
    return {};
  });
  if (!st.ok()) return st.error();
  return out;
}

std::string GgufWriter::Bytes() const {
  auto b = Build();
  return b.ok() ? std::move(b).value() : std::string();
}

namespace {

// An open file that is removed unless Commit renames it into place.
class PartialFile {
 public:
  PartialFile(std::string tmp, std::string path) : tmp_(std::move(tmp)), path_(std::move(path)) {}
  ~PartialFile() {
    if (f_) std::fclose(f_);
    if (!committed_) {
      std::error_code ec;
      std::filesystem::remove(tmp_, ec);
    }
  }
  Status Open() {
    f_ = std::fopen(tmp_.c_str(), "wb");
    if (!f_) return MakeError("cannot write '" + tmp_ + "': " + std::strerror(errno));
    return {};
  }
  Status Write(const void* p, size_t n) {
    if (n && std::fwrite(p, 1, n, f_) != n) return MakeError("writing '" + tmp_ + "' failed: " + std::strerror(errno));
    return {};
  }
  Status Commit() {
    const bool closed = std::fclose(f_) == 0;
    f_ = nullptr;
    if (!closed) return MakeError("closing '" + tmp_ + "' failed: " + std::strerror(errno));
    std::error_code ec;
    std::filesystem::rename(tmp_, path_, ec);
    if (ec) return MakeError("cannot rename '" + tmp_ + "' to '" + path_ + "': " + ec.message());
    committed_ = true;
    return {};
  }

 private:
  std::string tmp_, path_;
  std::FILE* f_ = nullptr;
  bool committed_ = false;
};

}  // namespace

Status GgufWriter::WriteFile(const std::string& path, const Progress& progress) const {
  PartialFile f(path + ".partial", path);
  KVTRIM_RETURN_IF_ERROR(f.Open());
  const std::string header = Header();
  const uint64_t total = header.size() + data_bytes_;
  uint64_t written = 0;
  auto sink = [&](const void* p, size_t n) -> Status {
    KVTRIM_RETURN_IF_ERROR(f.Write(p, n));
    written += n;
    if (progress && n) progress(written, total);
    return {};
  };
  KVTRIM_RETURN_IF_ERROR(sink(header.data(), header.size()));
  KVTRIM_RETURN_IF_ERROR(WriteData(sink));
  return f.Commit();
}

}  // namespace kvtrim::io
