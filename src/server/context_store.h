// Stored compressed contexts (POST /v1/contexts): a session prefilled and
// compressed once, then only forked by requests (Session::Fork copies the
// cache), so it is never modified after it is stored. Bounded by bytes; the
// least recently used contexts are dropped to make room. Thread-safe.
// With a directory (kvtrim serve --context-store DIR) every stored context is
// also written there as a context file (docs/context-file.md) before it is
// acknowledged; memory is then a cache over the directory: a context dropped
// from memory, or stored before a restart, is loaded on demand.
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
  // Makes a stored context from a context file (the server's engine and options).
  using Loader = std::function<Expected<std::shared_ptr<StoredContext>>(const std::string& path)>;
  explicit ContextStore(size_t capacity_bytes) : capacity_(capacity_bytes) {}
  // Keeps every context in `dir` too (created if absent); ids continue after
  // the largest "ctx-N" found there.
  Status UseDirectory(const std::string& dir, Loader load);

  // Stores `c` under a new id ("ctx-1", "ctx-2", ...), dropping least recently
  // used contexts until it fits; an error when it alone exceeds the capacity
  // (or, with a directory, when its file cannot be written).
  Expected<std::string> Put(std::shared_ptr<StoredContext> c);
  // The context (marked most recently used), or nullptr when absent or
  // dropped; with a directory, a context only on disk is loaded first (a
  // file that is refused is reported on stderr and answers nullptr).
  std::shared_ptr<const StoredContext> Get(const std::string& id);
  // The context if it is in memory (not marked used, never loaded).
  std::shared_ptr<const StoredContext> Peek(const std::string& id) const;
  bool Erase(const std::string& id);
  void Clear();

  size_t bytes() const;     // bytes_held summed over the stored contexts
  size_t size() const;
  int64_t evicted() const;  // contexts dropped to make room so far
  size_t capacity() const { return capacity_; }
  std::vector<std::string> Ids() const;  // most recently used first, then those only on disk
  const std::string& directory() const { return dir_; }

 private:
  using Lru = std::list<std::shared_ptr<StoredContext>>;
  const size_t capacity_;
  mutable std::mutex mu_;
  Lru lru_;  // front: most recently used
  std::unordered_map<std::string, Lru::iterator> index_;
  size_t bytes_ = 0;
  int64_t next_id_ = 1, evicted_ = 0;
  std::string dir_;
  Loader load_;
  std::string PathOf(const std::string& id) const { return dir_ + "/" + id + ".kvc"; }
  void Insert(std::shared_ptr<StoredContext> c);  // under mu_: into memory, dropping LRU ones to fit
};

}  // namespace kvtrim::server
