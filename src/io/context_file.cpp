#include "io/context_file.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>  // Debian libxxhash-dev: the checksum (XXH3-64)

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "io/mmap_file.h"

namespace kvtrim::io {

namespace {

void Put(std::string& out, const void* p, size_t n) { out.append(static_cast<const char*>(p), n); }
void PutU64(std::string& out, uint64_t x) { Put(out, &x, sizeof(x)); }

}  // namespace

// The whole file in memory, in write order, checksum last.
std::string SerializeContext(const ContextImage& img) {
  std::string out;
  Put(out, kContextMagic, sizeof(kContextMagic));
  const uint32_t version = kContextFormatVersion, flags = 0;
  Put(out, &version, 4);
  Put(out, &flags, 4);
  const std::string meta = img.meta.dump();
  PutU64(out, meta.size());
  out += meta;
  PutU64(out, img.tokens.size());
  Put(out, img.tokens.data(), img.tokens.size() * sizeof(int32_t));
  PutU64(out, img.logits.size());
  Put(out, img.logits.data(), img.logits.size() * sizeof(float));
  PutU64(out, img.heads.size());
  PutU64(out, img.row_bytes);
  for (const ContextImage::Head& h : img.heads) {
    PutU64(out, h.pos.size());
    Put(out, h.k.data(), h.k.size());
    Put(out, h.v.data(), h.v.size());
    Put(out, h.pos.data(), h.pos.size() * sizeof(int32_t));
    Put(out, h.logw.data(), h.logw.size() * sizeof(float));
  }
  PutU64(out, XXH3_64bits(out.data(), out.size()));
  return out;
}

namespace {

// Reads forward through [p, end); every read is checked against what is left.
struct ContextCursor {
  const uint8_t* p;
  const uint8_t* end;
  size_t left() const { return static_cast<size_t>(end - p); }
  bool Bytes(void* out, size_t n) {
    if (n > left()) return false;
    if (n == 0) return true;  // an empty section: out may be null (empty vector), memcpy's is then UB
    std::memcpy(out, p, n);
    p += n;
    return true;
  }
  bool U64(uint64_t* x) { return Bytes(x, sizeof(*x)); }
  // A count of `elem`-byte items that must fit in what is left.
  bool Count(uint64_t* n, size_t elem) { return U64(n) && elem > 0 && *n <= left() / elem; }
  template <class T>
  bool Array(std::vector<T>* v, uint64_t n) {
    v->resize(n);
    return Bytes(v->data(), n * sizeof(T));
  }
};

Error Truncated(const char* what) { return MakeError(std::string("truncated or corrupt context file (") + what + ")"); }

Status WriteAll(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return MakeError(std::string("write failed: ") + std::strerror(errno));
    done += static_cast<size_t>(w);
  }
  return {};
}

}  // namespace

Expected<ContextImage> ParseContextBytes(const uint8_t* data, size_t size) {
  const size_t head = sizeof(kContextMagic) + 8 + 8;
  if (size < head + 8) return Truncated("shorter than its header");
  if (std::memcmp(data, kContextMagic, sizeof(kContextMagic)) != 0) return MakeError("not a kvtrim context file (bad magic)");
  uint32_t version = 0;
  std::memcpy(&version, data + 8, 4);
  if (version != kContextFormatVersion)
    return MakeError("context file format version " + std::to_string(version) + " (this kvtrim reads version " +
                     std::to_string(kContextFormatVersion) + ")");
  uint64_t sum = 0;
  std::memcpy(&sum, data + size - 8, 8);
  if (XXH3_64bits(data, size - 8) != sum) return MakeError("checksum mismatch: the context file is corrupt or truncated");
  ContextCursor c{data + 16, data + size - 8};
  ContextImage img;
  uint64_t n = 0;
  if (!c.Count(&n, 1)) return Truncated("header");
  img.meta = nlohmann::json::parse(c.p, c.p + n, nullptr, /*allow_exceptions=*/false);
  if (img.meta.is_discarded() || !img.meta.is_object()) return MakeError("context file header is not a JSON object");
  c.p += n;
  if (!c.Count(&n, sizeof(int32_t)) || !c.Array(&img.tokens, n)) return Truncated("tokens");
  if (!c.Count(&n, sizeof(float)) || !c.Array(&img.logits, n)) return Truncated("logits");
  uint64_t heads = 0, rb = 0;
  if (!c.Count(&heads, sizeof(uint64_t)) || !c.U64(&rb) || rb == 0 || rb > (1u << 20)) return Truncated("heads");
  img.row_bytes = static_cast<size_t>(rb);
  img.heads.resize(heads);
  const size_t per_entry = 2 * img.row_bytes + sizeof(int32_t) + sizeof(float);
  for (ContextImage::Head& h : img.heads) {
    if (!c.Count(&n, per_entry)) return Truncated("entries");
    if (!c.Array(&h.k, n * img.row_bytes) || !c.Array(&h.v, n * img.row_bytes) || !c.Array(&h.pos, n) ||
        !c.Array(&h.logw, n))
      return Truncated("entries");
  }
  if (c.left() != 0) return MakeError("context file has " + std::to_string(c.left()) + " bytes after its last head");
  return img;
}

Expected<ContextImage> ReadContextFile(const std::string& path) {
  auto f = MappedFile::Open(path);
  if (!f.ok()) return MakeError("context file '" + path + "': " + f.error().message);
  auto img = ParseContextBytes(f.value()->data(), f.value()->size());
  if (!img.ok()) return MakeError("context file '" + path + "': " + img.error().message);
  return img;
}

Status WriteFileAtomically(const std::string& path, const std::string& bytes) {
  static std::atomic<uint64_t> serial{0};  // two threads writing one path use two temporary files
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(serial++);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return MakeError("cannot write '" + tmp + "': " + std::strerror(errno));
  Status st = WriteAll(fd, bytes);
  if (st.ok() && ::fsync(fd) != 0) st = MakeError(std::string("fsync failed: ") + std::strerror(errno));
  ::close(fd);
  if (st.ok() && std::rename(tmp.c_str(), path.c_str()) != 0)
    st = MakeError(std::string("rename failed: ") + std::strerror(errno));
  if (!st.ok()) {
    std::remove(tmp.c_str());
    return st;
  }
  // The rename itself lasts once the directory's entry is on disk.
  std::string dir = std::filesystem::path(path).parent_path().string();
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return {};
}

Status WriteContextFile(const std::string& path, const ContextImage& img) {
  Status st = WriteFileAtomically(path, SerializeContext(img));
  if (!st.ok()) return MakeError("context file '" + path + "': " + st.message());
  return {};
}

}  // namespace kvtrim::io
