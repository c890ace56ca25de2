// Where stored contexts outlast the process (kvtrim serve --context-store):
// a directory of context files, or a Redis server that several replicas
// share. A value is a context file's bytes (docs/context-file.md), its key
// the context's id ("ctx-N", or "prompt-HEX" for a cached prompt). The
// ContextStore keeps its in-memory LRU over one of these.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kvtrim/status.h"

namespace kvtrim::server {

// Ids that may name a stored context: letters, digits, '-' and '_', at most
// 64 characters (they become file names and Redis keys).
bool IsContextId(const std::string& id);
// OK when IsContextId(id), else an error "WHAT = 'ID': letters, digits, ..." (what: the field named).
Status CheckContextId(const std::string& what, const std::string& id);

class ContextBackend {
 public:
  virtual ~ContextBackend() = default;
  // "directory D" or "redis://HOST:PORT", for messages.
  virtual std::string name() const = 0;
  // N for a new id "ctx-N": unique among every process sharing the store.
  virtual Expected<int64_t> NextNumber() = 0;
  // Stores `bytes` under `id` before returning, never half (a reader sees
  // the old value, the new one or none).
  virtual Status Write(const std::string& id, const std::string& bytes) = 0;
  // The bytes under `id`; nullopt when absent; an error when the store fails.
  virtual Expected<std::optional<std::string>> Read(const std::string& id) = 0;
  // Marks `id` used now (the bound drops the least recently used first).
  virtual void Touch(const std::string& id) = 0;
  virtual bool Remove(const std::string& id) = 0;
  // Every id held (empty on an error, reported on stderr).
  virtual std::vector<std::string> List() = 0;
};

// A store holds one space of ids: "ctx" (stored contexts and cached
// prompts, numbered "ctx-N") or "conv" (conversations, "conv-N").
// A directory (created if absent) bounded to `max_bytes` of context files
// (0: unbounded), least recently used dropped first. Temporary files left by
// a writer that was killed are removed.
Expected<std::unique_ptr<ContextBackend>> OpenDirectoryBackend(const std::string& dir, uint64_t max_bytes,
                                                                const std::string& space = "ctx");
// "redis://HOST:PORT": keys "kvtrim:SPACE:ID", the id counter "kvtrim:SPACE-next".
// Redis bounds itself (maxmemory, maxmemory-policy allkeys-lru).
Expected<std::unique_ptr<ContextBackend>> OpenRedisBackend(const std::string& url, const std::string& space = "ctx");
// Either, by the spelling of `spec` (a redis:// URL or a directory: the
// space "ctx" is the directory itself, another space its subdirectory of
// that name); `max_bytes` applies to a directory only (an error with a Redis URL).
Expected<std::unique_ptr<ContextBackend>> OpenContextBackend(const std::string& spec, uint64_t max_bytes,
                                                            const std::string& space = "ctx");

}  // namespace kvtrim::server
