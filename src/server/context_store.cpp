#include "server/context_store.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

namespace kvtrim::server {

namespace fs = std::filesystem;

namespace {
// N of an id "ctx-N" (0 for any other name).
int64_t IdNumber(const std::string& id) {
  if (id.rfind("ctx-", 0) != 0 || id.size() <= 4 || id.size() > 22) return 0;
  for (size_t i = 4; i < id.size(); ++i)
    if (id[i] < '0' || id[i] > '9') return 0;
  return std::stoll(id.substr(4));
}
}  // namespace

Status ContextStore::UseDirectory(const std::string& dir, Loader load) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) return MakeError("context store directory '" + dir + "': " + ec.message());
  std::lock_guard<std::mutex> lk(mu_);
  dir_ = dir;
  load_ = std::move(load);
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".kvc") next_id_ = std::max(next_id_, IdNumber(e.path().stem().string()) + 1);
  return {};
}

void ContextStore::Insert(std::shared_ptr<StoredContext> c) {
  while (bytes_ + c->bytes_held > capacity_ && !lru_.empty()) {
    bytes_ -= lru_.back()->bytes_held;
    index_.erase(lru_.back()->id);
    lru_.pop_back();  // requests still forking it keep it alive until they finish
    ++evicted_;
  }
  bytes_ += c->bytes_held;
  lru_.push_front(std::move(c));
  index_[lru_.front()->id] = lru_.begin();
}

Expected<std::string> ContextStore::Put(std::shared_ptr<StoredContext> c) {
  if (c->bytes_held > capacity_) {
    return MakeError("the compressed context holds " + std::to_string(c->bytes_held) +
                     " bytes, more than the whole context store (" + std::to_string(capacity_) +
                     " bytes, --context-store-mib)");
  }
  std::unique_lock<std::mutex> lk(mu_);
  c->id = "ctx-" + std::to_string(next_id_++);
  if (!dir_.empty()) {  // on disk before it is acknowledged (written atomically)
    lk.unlock();
    KVTRIM_RETURN_IF_ERROR(c->session->SaveContext(PathOf(c->id)));
    lk.lock();
  }
  Insert(c);
  return c->id;
}

std::shared_ptr<const StoredContext> ContextStore::Get(const std::string& id) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = index_.find(id);
  if (it != index_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
    return *it->second;
  }
  if (dir_.empty() || IdNumber(id) == 0 || !fs::exists(PathOf(id))) return nullptr;
  auto c = load_(PathOf(id));
  if (!c.ok()) {
    std::fprintf(stderr, "kvtrim serve: %s\n", c.error().message.c_str());
    return nullptr;
  }
  c.value()->id = id;
  if (c.value()->bytes_held > capacity_) return c.value();  // served once, not kept in memory
  Insert(c.value());
  return c.value();
}

std::shared_ptr<const StoredContext> ContextStore::Peek(const std::string& id) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = index_.find(id);
  return it == index_.end() ? nullptr : *it->second;
}

bool ContextStore::Erase(const std::string& id) {
  std::lock_guard<std::mutex> lk(mu_);
  bool found = false;
  if (!dir_.empty() && IdNumber(id) > 0) found = std::remove(PathOf(id).c_str()) == 0;
  auto it = index_.find(id);
  if (it == index_.end()) return found;
  bytes_ -= (*it->second)->bytes_held;
  lru_.erase(it->second);
  index_.erase(it);
  return true;
}

void ContextStore::Clear() {
  std::lock_guard<std::mutex> lk(mu_);
  lru_.clear();
  index_.clear();
  bytes_ = 0;
}

size_t ContextStore::bytes() const {
  std::lock_guard<std::mutex> lk(mu_);
  return bytes_;
}

size_t ContextStore::size() const {
  std::lock_guard<std::mutex> lk(mu_);
  return lru_.size();
}

int64_t ContextStore::evicted() const {
  std::lock_guard<std::mutex> lk(mu_);
  return evicted_;
}

std::vector<std::string> ContextStore::Ids() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<std::string> ids;
  for (const auto& c : lru_) ids.push_back(c->id);
  if (dir_.empty()) return ids;
  std::vector<std::pair<int64_t, std::string>> disk;  // only on disk, by number
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    const std::string id = e.path().stem().string();
    if (e.path().extension() == ".kvc" && IdNumber(id) > 0 && !index_.count(id)) disk.emplace_back(IdNumber(id), id);
  }
  std::sort(disk.begin(), disk.end());
  for (auto& [n, id] : disk) ids.push_back(id);
  return ids;
}

}  // namespace kvtrim::server
