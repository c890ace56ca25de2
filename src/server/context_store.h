// Stored compressed contexts (POST /v1/contexts): a session prefilled and
// compressed once, then only forked by requests (Session::Fork copies the
// cache), so it is never modified after it is stored. Bounded by bytes; the
// least recently used contexts are dropped to make room. Thread-safe.
// With a backend (kvtrim serve --context-store DIR or redis://HOST:PORT,
// server/context_backend.h) every stored context is also written there as a
// context file's bytes (docs/context-file.md) before it is acknowledged;
// memory is then a cache over the backend: a context dropped from memory,
// stored before a restart or by another replica is loaded on demand.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "kvtrim/engine.h"
#include "kvtrim/status.h"
#include "server/context_backend.h"

namespace kvtrim::server {

struct StoredContext {
  std::string id;                    // set by ContextStore::Put
  std::unique_ptr<Session> session;  // prefilled and compressed; only Fork is called on it
  KvOptions kv;
  int tokens = 0;                    // prompt tokens prefilled (BOS included)
  int last_token = -1;               // the last of them (text of the next piece follows it)
  size_t kv_bytes = 0;               // bytes the cache's entries occupy (as `kvtrim run` reports)
  size_t kv_bytes_full = 0;          // an exact full f32 cache of the same tokens
  size_t kv_bytes_peak = 0;          // the most its session held at once while it was made
  size_t bytes_held = 0;             // bytes allocated for the cache: what the store counts
  double compress_ms = 0;
  double prefill_ms = 0;
};

class ContextStore {
 public:
  // Makes a stored context from a context file's bytes (the server's engine
  // and options); `name` begins its errors.
  using Loader =
      std::function<Expected<std::shared_ptr<StoredContext>>(const std::string& bytes, const std::string& name)>;
  explicit ContextStore(size_t capacity_bytes) : capacity_(capacity_bytes) {}
  // Keeps every context in `backend` too.
  void UseBackend(std::unique_ptr<ContextBackend> backend, Loader load);

  // Stores `c` under a new id ("ctx-1", "ctx-2", ...; with a backend, the
  // backend's counter), dropping least recently used contexts from memory
  // until it fits; an error when it alone exceeds the capacity or the
  // backend cannot take it.
  Expected<std::string> Put(std::shared_ptr<StoredContext> c);
  // The same under a given id (a cached prompt's), replacing what it held.
  Status PutAs(const std::string& id, std::shared_ptr<StoredContext> c);
  // The context (marked most recently used), or nullptr when absent or
  // dropped; with a backend, a context it alone holds is loaded first (one
  // that is refused is reported on stderr and answers nullptr).
  std::shared_ptr<const StoredContext> Get(const std::string& id);
  // The context if it is in memory (not marked used, never loaded).
  std::shared_ptr<const StoredContext> Peek(const std::string& id) const;
  bool Erase(const std::string& id);
  void Clear();

  size_t bytes() const;     // bytes_held summed over the contexts in memory
  size_t size() const;
  int64_t evicted() const;  // contexts dropped from memory to make room so far
  size_t capacity() const { return capacity_; }
  // Those in memory, most recently used first, then those only in the backend.
  std::vector<std::string> Ids() const;
  bool durable() const { return backend_ != nullptr; }

 private:
  using Lru = std::list<std::shared_ptr<StoredContext>>;
  const size_t capacity_;
  mutable std::mutex mu_;
  Lru lru_;  // front: most recently used
  std::unordered_map<std::string, Lru::iterator> index_;
  size_t bytes_ = 0;
  int64_t next_id_ = 1, evicted_ = 0;
  std::unique_ptr<ContextBackend> backend_;  // set before serving, never changed after
  Loader load_;
  Status Store(const std::string& id, const std::shared_ptr<StoredContext>& c);  // checks the bound, writes
  void Insert(std::shared_ptr<StoredContext> c);  // under mu_: into memory, dropping LRU ones to fit
  void EraseLocked(const std::string& id);
};

}  // namespace kvtrim::server
