// The directory context store: one context file per id ("ID.kvc"), written
// atomically (io::WriteFileAtomically), bounded by the files' total size
// with the files' modification times as the LRU order (Touch sets it), so
// the order survives a restart.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>

#include "io/context_file.h"
#include "server/context_backend.h"

namespace kvtrim::server {

namespace fs = std::filesystem;

namespace {

// N of an id "PREFIX-N" (0 for any other name).
int64_t IdNumber(const std::string& id, const std::string& prefix) {
  const size_t k = prefix.size();
  if (id.rfind(prefix, 0) != 0 || id.size() <= k || id.size() > k + 18) return 0;
  for (size_t i = k; i < id.size(); ++i)
    if (id[i] < '0' || id[i] > '9') return 0;
  return std::stoll(id.substr(k));
}

class DirectoryBackend : public ContextBackend {
 public:
  DirectoryBackend(std::string dir, uint64_t max_bytes, const std::string& space)
      : dir_(std::move(dir)), max_bytes_(max_bytes), prefix_(space + "-") {}

  // Removes what killed writers left; the counter continues after the largest N.
  void Scan() {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_, ec)) {
      const std::string f = e.path().filename().string();
      if (f.find(".kvc.tmp.") != std::string::npos) fs::remove(e.path(), ec);
      else if (e.path().extension() == ".kvc") next_ = std::max(next_, IdNumber(e.path().stem().string(), prefix_) + 1);
    }
  }

  std::string name() const override { return "directory " + dir_; }

  Expected<int64_t> NextNumber() override {
    std::lock_guard<std::mutex> lk(mu_);
    return next_++;
  }

  Status Write(const std::string& id, const std::string& bytes) override {
    if (max_bytes_ > 0 && bytes.size() > max_bytes_)
      return MakeError("the context file (" + std::to_string(bytes.size()) + " bytes) exceeds the store's bound (" +
                       std::to_string(max_bytes_) + " bytes, --context-store-gib)");
    Status st = io::WriteFileAtomically(PathOf(id), bytes);
    if (!st.ok()) return MakeUnavailable("context file '" + PathOf(id) + "': " + st.message());
    if (max_bytes_ > 0) Trim(id);
    return {};
  }

  Expected<std::optional<std::string>> Read(const std::string& id) override {
    std::ifstream in(PathOf(id), std::ios::binary);
    if (!in) return std::optional<std::string>();
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) return MakeUnavailable("context file '" + PathOf(id) + "': read failed");
    return std::optional<std::string>(ss.str());
  }

  void Touch(const std::string& id) override {
    std::error_code ec;
    fs::last_write_time(PathOf(id), fs::file_time_type::clock::now(), ec);
  }

  bool Remove(const std::string& id) override { return std::remove(PathOf(id).c_str()) == 0; }

  std::vector<std::string> List() override {
    std::vector<std::pair<int64_t, std::string>> ids;  // ctx-N by N, then the others by name
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_, ec)) {
      const std::string id = e.path().stem().string();
      if (e.path().extension() == ".kvc" && IsContextId(id))
        ids.emplace_back(IdNumber(id, prefix_) > 0 ? IdNumber(id, prefix_) : INT64_MAX, id);
    }
    std::sort(ids.begin(), ids.end());
    std::vector<std::string> out;
    for (auto& [n, id] : ids) out.push_back(id);
    return out;
  }

 private:
  std::string dir_;
  uint64_t max_bytes_;
  std::string prefix_;  // "SPACE-" of numbered ids
  std::mutex mu_;  // next_, and one trim at a time
  int64_t next_ = 1;

  std::string PathOf(const std::string& id) const { return dir_ + "/" + id + ".kvc"; }

  // Drops the least recently used files (never `keep`) until the total fits.
  void Trim(const std::string& keep) {
    std::lock_guard<std::mutex> lk(mu_);
    struct File {
      fs::file_time_type used;
      uint64_t bytes;
      fs::path path;
    };
    std::vector<File> files;
    uint64_t total = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_, ec)) {
      if (e.path().extension() != ".kvc") continue;
      std::error_code e1, e2;
      File f{fs::last_write_time(e.path(), e1), fs::file_size(e.path(), e2), e.path()};
      if (e1 || e2) continue;  // removed meanwhile
      total += f.bytes;
      if (e.path().stem().string() != keep) files.push_back(std::move(f));
    }
    std::sort(files.begin(), files.end(), [](const File& a, const File& b) { return a.used < b.used; });
    for (const File& f : files) {
      if (total <= max_bytes_) break;
      if (fs::remove(f.path, ec)) total -= f.bytes;
    }
  }
};

}  // namespace

Expected<std::unique_ptr<ContextBackend>> OpenDirectoryBackend(const std::string& dir, uint64_t max_bytes,
                                                                const std::string& space) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) return MakeError("context store directory '" + dir + "': " + ec.message());
  auto b = std::make_unique<DirectoryBackend>(dir, max_bytes, space);
  b->Scan();
  return std::unique_ptr<ContextBackend>(std::move(b));
}

Expected<std::unique_ptr<ContextBackend>> OpenContextBackend(const std::string& spec, uint64_t max_bytes,
                                                            const std::string& space) {
  if (spec.rfind("redis://", 0) == 0) {
    if (max_bytes > 0)
      return MakeError("--context-store-gib bounds a directory; bound a Redis store with its own maxmemory and "
                       "maxmemory-policy allkeys-lru");
    return OpenRedisBackend(spec, space);
  }
  return OpenDirectoryBackend(space == "ctx" ? spec : spec + "/" + space, max_bytes, space);
}

}  // namespace kvtrim::server
