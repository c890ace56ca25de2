// The server's conversations (POST /v1/conversations, a chat request's
// "conversation" field): each a kvtrim::Conversation whose turns run one at
// a time in the order their requests arrived, kept in memory and, with
// --context-store, written to the store's "conv" space after every turn
// before the answer is sent, so a restarted server continues it.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvtrim/conversation.h"
#include "kvtrim/status.h"
#include "server/context_backend.h"

namespace kvtrim::server {

struct ConversationEntry {
  std::string id;
  // Turn order: a ticket per request when it arrives; turns run in ticket order.
  std::mutex mu;
  std::condition_variable cv;
  uint64_t next_ticket = 0, serving = 0;
  // Only the turn being served touches these.
  std::shared_ptr<Conversation> conv;  // null: not loaded (or dropped after a failed turn)
  std::atomic<bool> erased{false};     // deleted: never written again
  // What GET shows, replaced after every turn (under info_mu).
  std::mutex info_mu;
  nlohmann::json info;
};

// Holds a conversation for one turn: waits, on construction, until every
// request that arrived before this one on the same conversation is done.
class ConversationTurn {
 public:
  explicit ConversationTurn(std::shared_ptr<ConversationEntry> e);
  ~ConversationTurn();
  ConversationTurn(const ConversationTurn&) = delete;
  ConversationTurn& operator=(const ConversationTurn&) = delete;
  ConversationEntry& entry() { return *e_; }
  std::shared_ptr<ConversationEntry> shared() const { return e_; }

 private:
  std::shared_ptr<ConversationEntry> e_;
};

// The conversation's state as GET /v1/conversations/ID reports it.
nlohmann::json ConversationJson(const std::string& id, const Conversation& c, bool with_messages);

class ConversationStore {
 public:
  // Makes a conversation from its bytes in the backend; `name` begins errors.
  using Loader = std::function<Expected<std::unique_ptr<Conversation>>(const std::string& bytes, const std::string& name)>;
  // With a backend, at most `in_memory` conversations stay loaded: after a
  // turn is stored, the least recently used ones no request holds are
  // dropped from memory (Find reads them back).
  void UseBackend(std::unique_ptr<ContextBackend> backend, Loader load, int in_memory);
  // Without a backend nothing can be dropped: at most `in_memory`
  // conversations exist, and Create refuses one more (kUnavailable, naming
  // the bound and the ways out) until one is deleted.
  void LimitInMemory(int in_memory);
  bool durable() const { return backend_ != nullptr; }
  size_t size();  // conversations in memory

  // A new conversation under `id` (empty: a new "conv-N"), written to the
  // backend before it is returned; an error when the id is taken or the
  // backend refuses it.
  Expected<std::shared_ptr<ConversationEntry>> Create(const std::string& id, std::unique_ptr<Conversation> c);
  // The conversation (loaded from the backend when only it holds one);
  // nullptr when there is none; an error when the backend fails.
  Expected<std::shared_ptr<ConversationEntry>> Find(const std::string& id);
  // Loads an entry's conversation from the backend again (after a failed
  // turn left the session unlike what was stored). The turn must hold it.
  Status Reload(ConversationEntry& e);
  // Writes the conversation (the turn holding it calls this before answering).
  Status Save(ConversationEntry& e);
  bool Erase(const std::string& id);
  // In memory, then those only in the backend.
  std::vector<std::string> Ids();

 private:
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<ConversationEntry>> map_;
  std::list<std::string> lru_;  // ids in map_, most recently used first
  size_t in_memory_ = 0;        // 0: unbounded (with a backend: kept loaded; without: in all)
  void Touch(const std::string& id);  // under mu_: to the front of lru_
  void Trim();                        // under mu_: drop idle ones beyond in_memory_
  int64_t next_id_ = 1;
  std::unique_ptr<ContextBackend> backend_;
  Loader load_;
  Expected<std::string> NewId();
};

}  // namespace kvtrim::server
