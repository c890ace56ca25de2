#include "server/context_store.h"

#include <algorithm>
#include <cstdio>
#include <unordered_set>

namespace kvtrim::server {

void ContextStore::UseBackend(std::unique_ptr<ContextBackend> backend, Loader load) {
  std::lock_guard<std::mutex> lk(mu_);
  backend_ = std::move(backend);
  load_ = std::move(load);
}

void ContextStore::Insert(std::shared_ptr<StoredContext> c) {
  EraseLocked(c->id);  // a cached prompt stored again
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

void ContextStore::EraseLocked(const std::string& id) {
  auto it = index_.find(id);
  if (it == index_.end()) return;
  bytes_ -= (*it->second)->bytes_held;
  lru_.erase(it->second);
  index_.erase(it);
}

Status ContextStore::Store(const std::string& id, const std::shared_ptr<StoredContext>& c) {
  if (c->bytes_held > capacity_) {
    return MakeError("the compressed context holds " + std::to_string(c->bytes_held) +
                     " bytes, more than the whole context store (" + std::to_string(capacity_) +
                     " bytes, --context-store-mib)");
  }
  c->id = id;
  // In the backend before it is acknowledged (the backend writes atomically).
  if (backend_) KVTRIM_RETURN_IF_ERROR(backend_->Write(id, c->session->ContextBytes()));
  std::lock_guard<std::mutex> lk(mu_);
  Insert(c);
  return {};
}

Expected<std::string> ContextStore::Put(std::shared_ptr<StoredContext> c) {
  int64_t n = 0;
  if (backend_) {
    auto b = backend_->NextNumber();
    if (!b.ok()) return b.error();
    n = b.value();
  } else {
    std::lock_guard<std::mutex> lk(mu_);
    n = next_id_++;
  }
  const std::string id = "ctx-" + std::to_string(n);
  KVTRIM_RETURN_IF_ERROR(Store(id, c));
  return id;
}

Status ContextStore::PutAs(const std::string& id, std::shared_ptr<StoredContext> c) {
  if (!IsContextId(id)) return MakeError("'" + id + "' cannot name a stored context");
  return Store(id, c);
}

std::shared_ptr<const StoredContext> ContextStore::Get(const std::string& id) {
  std::shared_ptr<const StoredContext> hit;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = index_.find(id);
    if (it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      hit = *it->second;
    }
  }
  if (hit) {
    if (backend_) backend_->Touch(id);  // the backend's bound drops it last too
    return hit;
  }
  if (!backend_ || !IsContextId(id)) return nullptr;
  // Loaded outside the lock: other requests go on meanwhile.
  auto bytes = backend_->Read(id);
  if (!bytes.ok()) std::fprintf(stderr, "kvtrim serve: %s\n", bytes.error().message.c_str());
  if (!bytes.ok() || !bytes.value()) return nullptr;
  auto c = load_(*bytes.value(), backend_->name() + ": context '" + id + "'");
  if (!c.ok()) {
    std::fprintf(stderr, "kvtrim serve: %s\n", c.error().message.c_str());
    return nullptr;
  }
  c.value()->id = id;
  if (c.value()->bytes_held > capacity_) return c.value();  // served once, not kept in memory
  std::lock_guard<std::mutex> lk(mu_);
  auto it = index_.find(id);
  if (it != index_.end()) return *it->second;  // another request loaded it meanwhile
  Insert(c.value());
  return c.value();
}

std::shared_ptr<const StoredContext> ContextStore::Peek(const std::string& id) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = index_.find(id);
  return it == index_.end() ? nullptr : *it->second;
}

bool ContextStore::Erase(const std::string& id) {
  const bool in_backend = backend_ && IsContextId(id) && backend_->Remove(id);
  std::lock_guard<std::mutex> lk(mu_);
  const bool in_memory = index_.count(id) > 0;
  EraseLocked(id);
  return in_backend || in_memory;
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
  std::vector<std::string> ids;
  std::unordered_set<std::string> seen;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (const auto& c : lru_) ids.push_back(c->id), seen.insert(c->id);
  }
  if (!backend_) return ids;
  for (auto& id : backend_->List())  // outside the lock: a directory scan or a Redis SCAN
    if (!seen.count(id)) ids.push_back(std::move(id));
  return ids;
}

}  // namespace kvtrim::server
