// ConversationStore and ConversationTurn (server/conversations.h).
#include "server/conversations.h"

#include <algorithm>

#include "engine/engine_impl.h"
#include "kv/cache.h"
#include "server/impl.h"

namespace kvtrim::server {

using nlohmann::json;

ConversationTurn::ConversationTurn(std::shared_ptr<ConversationEntry> e) : e_(std::move(e)) {
  std::unique_lock<std::mutex> lk(e_->mu);
  const uint64_t mine = e_->next_ticket++;
  e_->cv.wait(lk, [&] { return e_->serving == mine; });
}

ConversationTurn::~ConversationTurn() {
  {
    std::lock_guard<std::mutex> lk(e_->mu);
    ++e_->serving;
  }
  e_->cv.notify_all();
}

json ConversationJson(const std::string& id, const Conversation& c, bool with_messages) {
  const Session& s = c.session();
  const auto& cache = s.impl().cache();
  json j{{"id", id},
         {"object", "conversation"},
         {"turns", c.turns()},
         {"tokens", s.position()},  // every token the conversation has fed, its answers included
         {"rope_position", s.rope_position()},  // the next token's RoPE position: tokens until a re-base
         {"entries", cache.EntriesHeld()},
         {"kv_bytes", cache.BytesUsed()},
         {"kv_bytes_held", cache.BytesHeld()},
         {"kv_bytes_full", cache.BytesFull()},
         {"kv_bytes_peak", c.peak_kv_bytes()},
         {"kv_bytes_peak_turn", s.peak_kv_bytes()},
         {"kv", KvJson(s.kv_options())}};
  if (with_messages) {
    json m = json::array();
    for (const auto& x : c.messages()) m.push_back({{"role", x.role}, {"content", x.content}});
    j["messages"] = m;
  }
  return j;
}

void ConversationStore::UseBackend(std::unique_ptr<ContextBackend> backend, Loader load, int in_memory) {
  backend_ = std::move(backend);
  load_ = std::move(load);
  in_memory_ = static_cast<size_t>(std::max(1, in_memory));
}

void ConversationStore::LimitInMemory(int in_memory) { in_memory_ = static_cast<size_t>(std::max(1, in_memory)); }

size_t ConversationStore::size() {
  std::lock_guard<std::mutex> lk(mu_);
  return map_.size();
}

void ConversationStore::Touch(const std::string& id) {
  if (!backend_) return;  // nothing is dropped without a store: no order to keep
  lru_.remove(id);
  lru_.push_front(id);
}

// An entry no request holds (only the map's reference: Find and Create run
// under mu_, so none can take it meanwhile) is idle and stored: it can go.
void ConversationStore::Trim() {
  if (!backend_ || in_memory_ == 0) return;
  for (auto it = lru_.end(); map_.size() > in_memory_ && it != lru_.begin();) {
    --it;
    auto m = map_.find(*it);
    if (m != map_.end() && m->second.use_count() == 1) {
      map_.erase(m);
      it = lru_.erase(it);
    }
  }
}

Expected<std::string> ConversationStore::NewId() {
  if (!backend_) return "conv-" + std::to_string(next_id_++);
  auto n = backend_->NextNumber();
  if (!n.ok()) return n.error();
  return "conv-" + std::to_string(n.value());
}

Expected<std::shared_ptr<ConversationEntry>> ConversationStore::Create(const std::string& want,
                                                                       std::unique_ptr<Conversation> c) {
  std::lock_guard<std::mutex> lk(mu_);
  std::string id = want;
  if (id.empty()) {
    auto n = NewId();
    if (!n.ok()) return n.error();
    id = n.value();
  }
  KVTRIM_RETURN_IF_ERROR(CheckContextId("conversation id", id));
  if (map_.count(id)) return MakeError("conversation '" + id + "' exists");
  if (!backend_ && in_memory_ > 0 && map_.size() >= in_memory_)
    return MakeUnavailable(std::to_string(map_.size()) +
                           " conversations are held in memory, the server's bound (--conversations-in-memory), and "
                           "without a context store none can be set aside: delete one that has ended (DELETE "
                           "/v1/conversations/ID), or run the server with --context-store to keep more");
  if (backend_) {
    auto had = backend_->Read(id);
    if (!had.ok()) return had.error();
    if (had.value()) return MakeError("conversation '" + id + "' exists");
  }
  auto e = std::make_shared<ConversationEntry>();
  e->id = id;
  e->conv = std::move(c);
  e->info = ConversationJson(id, *e->conv, false);
  if (backend_) KVTRIM_RETURN_IF_ERROR(backend_->Write(id, e->conv->Bytes()));
  map_[id] = e;
  Touch(id);
  Trim();
  return e;
}

Expected<std::shared_ptr<ConversationEntry>> ConversationStore::Find(const std::string& id) {
  std::lock_guard<std::mutex> lk(mu_);
  if (auto it = map_.find(id); it != map_.end()) {
    Touch(id);
    return it->second;
  }
  if (!backend_ || !IsContextId(id)) return std::shared_ptr<ConversationEntry>();
  auto bytes = backend_->Read(id);
  if (!bytes.ok()) return bytes.error();
  if (!bytes.value()) return std::shared_ptr<ConversationEntry>();
  auto c = load_(*bytes.value(), "conversation '" + id + "' in " + backend_->name());
  if (!c.ok()) return c.error();
  auto e = std::make_shared<ConversationEntry>();
  e->id = id;
  e->conv = std::move(c.value());
  e->info = ConversationJson(id, *e->conv, false);
  map_[id] = e;
  Touch(id);
  Trim();
  return e;
}

Status ConversationStore::Reload(ConversationEntry& e) {
  e.conv.reset();
  if (!backend_) return MakeError("conversation '" + e.id + "' was lost: a turn failed midway and no store holds it");
  auto bytes = backend_->Read(e.id);
  if (!bytes.ok()) return bytes.error();
  if (!bytes.value()) return MakeError("conversation '" + e.id + "' is no longer in " + backend_->name());
  auto c = load_(*bytes.value(), "conversation '" + e.id + "' in " + backend_->name());
  if (!c.ok()) return c.error();
  e.conv = std::move(c.value());
  return {};
}

Status ConversationStore::Save(ConversationEntry& e) {
  {
    std::lock_guard<std::mutex> lk(e.info_mu);
    e.info = ConversationJson(e.id, *e.conv, false);
  }
  if (!backend_ || e.erased) return {};
  KVTRIM_RETURN_IF_ERROR(backend_->Write(e.id, e.conv->Bytes()));
  std::lock_guard<std::mutex> lk(mu_);
  Trim();  // this turn's entry is held by its request: never dropped here
  return {};
}

bool ConversationStore::Erase(const std::string& id) {
  std::shared_ptr<ConversationEntry> e;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (auto it = map_.find(id); it != map_.end()) {
      e = it->second;
      map_.erase(it);
      lru_.remove(id);
    }
  }
  if (e) e->erased = true;  // a turn that ends after this writes nothing
  const bool stored = backend_ && IsContextId(id) && backend_->Remove(id);
  return e != nullptr || stored;
}

std::vector<std::string> ConversationStore::Ids() {
  std::vector<std::string> ids;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (const auto& [id, e] : map_) ids.push_back(id);
  }
  if (backend_)
    for (auto& id : backend_->List())
      if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(std::move(id));
  return ids;
}

}  // namespace kvtrim::server
