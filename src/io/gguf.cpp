#include "io/gguf.h"

#include <cstring>
#include <limits>
#include <sstream>

namespace kvtrim::io {
// Bounds-checked little-endian cursor over the mapped file.
class Cursor {
 public:
  Cursor(const uint8_t* base, size_t size) : base_(base), size_(size) {}
  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  template <typename T>
  Status Read(T* out, const char* what) {
    if (remaining() < sizeof(T)) return Truncated(what);
    std::memcpy(out, base_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return {};
  }
  Status ReadString(std::string* out, const char* what, uint64_t limit = kGgufMaxStringBytes) {
    uint64_t n = 0;
    if (auto st = Read(&n, what); !st.ok()) return st;
    if (n > remaining()) {
      return MakeError(std::string("string length ") + std::to_string(n) + " for " + what +
                       " at offset " + std::to_string(pos_ - 8) + " runs past end of file (" +
                       std::to_string(size_) + " bytes)");
    }
    if (n > limit) {
      return MakeError(std::string("string length ") + std::to_string(n) + " for " + what + " at offset " +
                       std::to_string(pos_ - 8) + " exceeds the limit of " + std::to_string(limit) + " bytes (" +
                       (limit == kGgufMaxNameBytes ? "kGgufMaxNameBytes" : "kGgufMaxStringBytes") + ")");
    }
    out->assign(reinterpret_cast<const char*>(base_ + pos_), n);
    pos_ += n;
    return {};
  }

 private:
  Status Truncated(const char* what) const {
    return MakeError(std::string("file truncated while reading ") + what + " at offset " +
                     std::to_string(pos_) + " (file is " + std::to_string(size_) + " bytes)");
  }
  const uint8_t* base_;
  size_t size_;
  size_t pos_ = 0;
};

namespace {

constexpr int kMaxArrayDepth = 8;

bool ValidValueType(uint32_t t) { return t <= 12; }

// Smallest on-disk size of one element of a type (used to reject absurd counts).
size_t MinElemBytes(GgufValueType t) {
  switch (t) {
    case GgufValueType::U8: case GgufValueType::I8: case GgufValueType::BOOL: return 1;
    case GgufValueType::U16: case GgufValueType::I16: return 2;
    case GgufValueType::U32: case GgufValueType::I32: case GgufValueType::F32: return 4;
    case GgufValueType::STRING: case GgufValueType::U64: case GgufValueType::I64:
    case GgufValueType::F64: return 8;
    case GgufValueType::ARRAY: return 12;
  }
  return 1;
}

// Array elements read so far in the whole file (kGgufMaxArrayElems bounds the sum).
struct ElemBudget {
  uint64_t used = 0;
};

Status ReadValue(Cursor& c, GgufValueType t, GgufValue* out, int depth, const std::string& key, ElemBudget& budget) {
  out->type = t;
  auto rd = [&](auto tag, auto conv) -> Status {
    decltype(tag) x{};
    if (auto st = c.Read(&x, key.c_str()); !st.ok()) return st;
    out->v = conv(x);
    return {};
  };
  switch (t) {
    case GgufValueType::U8: return rd(uint8_t{}, [](uint8_t x) { return uint64_t{x}; });
    case GgufValueType::I8: return rd(int8_t{}, [](int8_t x) { return int64_t{x}; });
    case GgufValueType::U16: return rd(uint16_t{}, [](uint16_t x) { return uint64_t{x}; });
    case GgufValueType::I16: return rd(int16_t{}, [](int16_t x) { return int64_t{x}; });
    case GgufValueType::U32: return rd(uint32_t{}, [](uint32_t x) { return uint64_t{x}; });
    case GgufValueType::I32: return rd(int32_t{}, [](int32_t x) { return int64_t{x}; });
    case GgufValueType::U64: return rd(uint64_t{}, [](uint64_t x) { return x; });
    case GgufValueType::I64: return rd(int64_t{}, [](int64_t x) { return x; });
    case GgufValueType::F32: return rd(float{}, [](float x) { return double{x}; });
    case GgufValueType::F64: return rd(double{}, [](double x) { return x; });
    case GgufValueType::BOOL: {
      uint8_t b = 0;
      if (auto st = c.Read(&b, key.c_str()); !st.ok()) return st;
      if (b > 1) return MakeError("bad bool value " + std::to_string(b) + " for key '" + key + "'");
      out->v = b != 0;
      return {};
    }
    case GgufValueType::STRING: {
      std::string s;
      if (auto st = c.ReadString(&s, key.c_str()); !st.ok()) return st;
      out->v = std::move(s);
      return {};
    }
    case GgufValueType::ARRAY: {
      if (depth >= kMaxArrayDepth) return MakeError("arrays nested too deeply in key '" + key + "'");
      uint32_t et = 0;
      uint64_t n = 0;
      if (auto st = c.Read(&et, key.c_str()); !st.ok()) return st;
      if (!ValidValueType(et)) {
        return MakeError("bad array element type id " + std::to_string(et) + " for key '" + key + "'");
      }
      if (auto st = c.Read(&n, key.c_str()); !st.ok()) return st;
      auto etype = static_cast<GgufValueType>(et);
      if (n > kGgufMaxArrayElems - budget.used) {
        return MakeError("array length " + std::to_string(n) + " for key '" + key + "' exceeds the limit of " +
                         std::to_string(kGgufMaxArrayElems) + " array elements per file (kGgufMaxArrayElems; " +
                         std::to_string(budget.used) + " already read)");
      }
      if (n > c.remaining() / MinElemBytes(etype)) {
        return MakeError("array length " + std::to_string(n) + " for key '" + key +
                         "' runs past end of file");
      }
      budget.used += n;
      GgufArray arr(n);
      for (uint64_t i = 0; i < n; ++i) {
        if (auto st = ReadValue(c, etype, &arr[i], depth + 1, key, budget); !st.ok()) return st;
      }
      out->elem_type = etype;
      out->v = std::move(arr);
      return {};
    }
  }
  return MakeError("bad value type for key '" + key + "'");
}

}  // namespace

const char* GgufValueTypeName(GgufValueType t) {
  static const char* names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                "bool", "string", "array", "u64", "i64", "f64"};
  auto i = static_cast<uint32_t>(t);
  return i <= 12 ? names[i] : "?";
}

bool GgufValue::is_int() const {
  return std::holds_alternative<uint64_t>(v) || std::holds_alternative<int64_t>(v);
}

int64_t GgufValue::as_int() const {
  if (auto* u = std::get_if<uint64_t>(&v)) return static_cast<int64_t>(*u);
  if (auto* i = std::get_if<int64_t>(&v)) return *i;
  return 0;
}

double GgufValue::as_float() const {
  if (auto* d = std::get_if<double>(&v)) return *d;
  return static_cast<double>(as_int());
}

std::string GgufValue::ToString(size_t max_elems) const {
  std::ostringstream os;
  if (auto* u = std::get_if<uint64_t>(&v)) os << *u;
  else if (auto* i = std::get_if<int64_t>(&v)) os << *i;
  else if (auto* d = std::get_if<double>(&v)) os << *d;
  else if (auto* b = std::get_if<bool>(&v)) os << (*b ? "true" : "false");
  else if (auto* s = std::get_if<std::string>(&v)) {
    os << '"' << (s->size() > 60 ? s->substr(0, 60) + "..." : *s) << '"';
  } else if (auto* a = std::get_if<GgufArray>(&v)) {
    os << GgufValueTypeName(elem_type) << "[" << a->size() << "] [";
    for (size_t k = 0; k < a->size() && k < max_elems; ++k) os << (k ? ", " : "") << (*a)[k].ToString(2);
    if (a->size() > max_elems) os << ", ...";
    os << "]";
  }
  return os.str();
}

Expected<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  auto f = MappedFile::Open(path);
  if (!f.ok()) return f.error();
  auto g = Parse(std::move(f.value()));
  if (!g.ok()) return MakeError("'" + path + "': " + g.error().message);
  return g;
}

Expected<std::unique_ptr<GgufFile>> GgufFile::FromBytes(std::string bytes) {
  return Parse(MappedFile::FromBuffer(std::move(bytes)));
}

Status GgufFile::ParseMetadata(Cursor& c, uint64_t n_kv) {
  ElemBudget budget;
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key;
    if (auto st = c.ReadString(&key, "metadata key", kGgufMaxNameBytes); !st.ok()) return st;
    uint32_t t = 0;
    if (auto st = c.Read(&t, key.c_str()); !st.ok()) return st;
    if (!ValidValueType(t)) return MakeError("bad type id " + std::to_string(t) + " for key '" + key + "'");
    GgufValue val;
    if (auto st = ReadValue(c, static_cast<GgufValueType>(t), &val, 0, key, budget); !st.ok()) return st;
    if (kv_index_.count(key)) return MakeError("duplicate metadata key '" + key + "'");
    kv_index_[key] = kv_.size();
    kv_.emplace_back(std::move(key), std::move(val));
  }
  if (const GgufValue* a = Find("general.alignment")) {
    if (!a->is_int() || a->as_int() <= 0 || (a->as_int() & (a->as_int() - 1)) != 0) {
      return MakeError("general.alignment must be a positive power of two");
    }
    alignment_ = static_cast<uint64_t>(a->as_int());
  }

  return {};
}

Status GgufFile::ParseTensorInfos(Cursor& c, uint64_t n_tensors) {
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo ti;
    if (auto st = c.ReadString(&ti.name, "tensor name", kGgufMaxNameBytes); !st.ok()) return st;
    uint32_t nd = 0;
    if (auto st = c.Read(&nd, "tensor dims"); !st.ok()) return st;
    if (nd == 0 || nd > 4) {
      return MakeError("tensor '" + ti.name + "' has " + std::to_string(nd) + " dimensions (1..4 allowed)");
    }
    ti.n_elements = 1;
    for (uint32_t d = 0; d < nd; ++d) {
      uint64_t ne = 0;
      if (auto st = c.Read(&ne, "tensor shape"); !st.ok()) return st;
      if (ne == 0 || ne > (uint64_t{1} << 40) || ti.n_elements > (uint64_t{1} << 62) / ne) {
        return MakeError("tensor '" + ti.name + "' has a bad dimension " + std::to_string(ne));
      }
      ti.shape.push_back(ne);
      ti.n_elements *= ne;
    }
    uint32_t type = 0;
    if (auto st = c.Read(&type, "tensor type"); !st.ok()) return st;
    const TypeTraits* tt = GetTypeTraits(type);
    if (!tt) {
      return MakeError("tensor '" + ti.name + "' has unsupported type " + GgmlTypeIdName(type) + " (id " +
                       std::to_string(type) +
                       "; supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K)");
    }
    ti.type = static_cast<GgmlType>(type);
    if (ti.shape[0] % tt->block_elems != 0) {
      return MakeError("tensor '" + ti.name + "' row length " + std::to_string(ti.shape[0]) +
                       " is not a multiple of the " + tt->name + " block size");
    }
    if (ti.n_elements / tt->block_elems > kGgufMaxTensorBytes / tt->block_bytes) {
      return MakeError("tensor '" + ti.name + "' declares " + std::to_string(ti.n_elements) + " " + tt->name +
                       " elements, over the limit of " + std::to_string(kGgufMaxTensorBytes) +
                       " bytes per tensor (kGgufMaxTensorBytes)");
    }
    ti.n_bytes = ti.n_elements / tt->block_elems * tt->block_bytes;
    if (auto st = c.Read(&ti.offset, "tensor offset"); !st.ok()) return st;
    if (ti.offset % alignment_ != 0) {
      return MakeError("tensor '" + ti.name + "' offset " + std::to_string(ti.offset) + " is not aligned");
    }
    if (tensor_index_.count(ti.name)) return MakeError("duplicate tensor '" + ti.name + "'");
    tensor_index_[ti.name] = tensors_.size();
    tensors_.push_back(std::move(ti));
  }

  return {};
}

Expected<std::unique_ptr<GgufFile>> GgufFile::Parse(std::unique_ptr<MappedFile> f) {
  std::unique_ptr<GgufFile> g(new GgufFile());
  Cursor c(f->data(), f->size());
  uint32_t magic = 0;
  if (auto st = c.Read(&magic, "magic"); !st.ok()) return MakeError("not a GGUF file (too short)");
  if (std::memcmp(&magic, "GGUF", 4) != 0) return MakeError("not a GGUF file (bad magic)");
  if (auto st = c.Read(&g->version_, "version"); !st.ok()) return st.error();
  if (g->version_ != 2 && g->version_ != 3) {
    return MakeError("unsupported GGUF version " + std::to_string(g->version_) + " (need 2 or 3)");
  }
  uint64_t n_tensors = 0, n_kv = 0;
  if (auto st = c.Read(&n_tensors, "tensor count"); !st.ok()) return st.error();
  if (auto st = c.Read(&n_kv, "metadata count"); !st.ok()) return st.error();
  if (n_kv > kGgufMaxKv) {
    return MakeError("metadata count " + std::to_string(n_kv) + " exceeds the limit of " + std::to_string(kGgufMaxKv) +
                     " (kGgufMaxKv)");
  }
  if (n_tensors > kGgufMaxTensors) {
    return MakeError("tensor count " + std::to_string(n_tensors) + " exceeds the limit of " +
                     std::to_string(kGgufMaxTensors) + " (kGgufMaxTensors)");
  }
  if (n_kv > c.remaining() / 12) return MakeError("metadata count " + std::to_string(n_kv) + " exceeds file size");
  if (n_tensors > c.remaining() / 24) {
    return MakeError("tensor count " + std::to_string(n_tensors) + " exceeds file size");
  }

  KVTRIM_RETURN_IF_ERROR(g->ParseMetadata(c, n_kv));
  KVTRIM_RETURN_IF_ERROR(g->ParseTensorInfos(c, n_tensors));
  uint64_t data_start = (c.pos() + g->alignment_ - 1) / g->alignment_ * g->alignment_;
  for (auto& ti : g->tensors_) {
    if (data_start > f->size() || ti.offset > f->size() - data_start ||
        ti.n_bytes > f->size() - data_start - ti.offset) {
      return MakeError("tensor '" + ti.name + "' data (offset " + std::to_string(data_start + ti.offset) +
                       ", " + std::to_string(ti.n_bytes) + " bytes) runs past end of file (" +
                       std::to_string(f->size()) + " bytes)");
    }
    ti.data = f->data() + data_start + ti.offset;
  }
  g->file_ = std::move(f);
  return g;
}

const GgufValue* GgufFile::Find(const std::string& key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const GgufTensorInfo* GgufFile::FindTensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Expected<int64_t> GgufFile::GetInt(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (!v) return MakeError("missing key '" + key + "'");
  if (!v->is_int()) return MakeError("key '" + key + "' is " + GgufValueTypeName(v->type) + ", expected an integer");
  return v->as_int();
}

Expected<double> GgufFile::GetFloat(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (!v) return MakeError("missing key '" + key + "'");
  if (!v->is_float() && !v->is_int()) {
    return MakeError("key '" + key + "' is " + GgufValueTypeName(v->type) + ", expected a number");
  }
  return v->as_float();
}

Expected<std::string> GgufFile::GetString(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (!v) return MakeError("missing key '" + key + "'");
  auto* s = std::get_if<std::string>(&v->v);
  if (!s) return MakeError("key '" + key + "' is " + GgufValueTypeName(v->type) + ", expected a string");
  return *s;
}

Expected<bool> GgufFile::GetBool(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (!v) return MakeError("missing key '" + key + "'");
  auto* b = std::get_if<bool>(&v->v);
  if (!b) return MakeError("key '" + key + "' is " + GgufValueTypeName(v->type) + ", expected a bool");
  return *b;
}

Expected<const GgufArray*> GgufFile::GetArray(const std::string& key, GgufValueType elem) const {
  const GgufValue* v = Find(key);
  if (!v) return MakeError("missing key '" + key + "'");
  auto* a = std::get_if<GgufArray>(&v->v);
  if (!a) return MakeError("key '" + key + "' is " + GgufValueTypeName(v->type) + ", expected an array");
  if (v->elem_type != elem) {
    return MakeError("key '" + key + "' is an array of " + GgufValueTypeName(v->elem_type) + ", expected " +
                     GgufValueTypeName(elem));
  }
  return a;
}

}  // namespace kvtrim::io
