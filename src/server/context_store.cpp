#include "server/context_store.h"

namespace kvtrim::server {

Expected<std::string> ContextStore::Put(std::shared_ptr<StoredContext> c) {
  if (c->bytes_held > capacity_) {
    return MakeError("the compressed context holds " + std::to_string(c->bytes_held) +
                     " bytes, more than the whole context store (" + std::to_string(capacity_) +
                     " bytes, --context-store-mib)");
  }
  std::lock_guard<std::mutex> lk(mu_);
  while (bytes_ + c->bytes_held > capacity_ && !lru_.empty()) {
    bytes_ -= lru_.back()->bytes_held;
    index_.erase(lru_.back()->id);
    lru_.pop_back();  // requests still forking it keep it alive until they finish
    ++evicted_;
  }
  c->id = "ctx-" + std::to_string(next_id_++);
  bytes_ += c->bytes_held;
  lru_.push_front(std::move(c));
  index_[lru_.front()->id] = lru_.begin();
  return lru_.front()->id;
}

std::shared_ptr<const StoredContext> ContextStore::Get(const std::string& id) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = index_.find(id);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return *it->second;
}

bool ContextStore::Erase(const std::string& id) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = index_.find(id);
  if (it == index_.end()) return false;
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
  return ids;
}

}  // namespace kvtrim::server
