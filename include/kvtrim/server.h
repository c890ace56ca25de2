// `kvtrim serve`: an OpenAI/llama.cpp-style HTTP server over one Engine
// (docs/server.md). Each request runs its own Session; a stored context is
// prefilled and compressed once and forked by every request that names it.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "kvtrim/engine.h"
#include "kvtrim/options.h"
#include "kvtrim/status.h"

namespace kvtrim::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;          // 0: an ephemeral port (Server::port() tells which)
  int parallel = 1;         // requests running the model at once
  int queue = 16;           // requests waiting beyond those; more get 503
  int threads = 0;          // threads in all (split among the slots); 0: the engine's
  int keep_alive_s = 2;     // an idle keep-alive connection is closed after this
  size_t context_store_bytes = size_t{256} << 20;
  // Where stored contexts outlast the process: a directory of context files
  // or "redis://HOST:PORT" shared by replicas (empty: memory only).
  std::string context_store;
  uint64_t context_store_disk_bytes = 0;  // a directory's bound (0: none), LRU
  // With a context store: at most this many conversations kept in memory,
  // the least recently used idle ones dropped (read back from the store
  // when next named). Without one, at most this many conversations: a new
  // one beyond it is refused (503) until one is deleted.
  int conversations_in_memory = 64;
  int ctx = 0;              // context length of every session (0: the model's)
  size_t max_body_bytes = size_t{64} << 20;  // a request body over this is refused (413)
  KvOptions kv;             // defaults for requests that leave KV fields out
  std::string model_name;   // reported by /v1/models and in responses
};

// Every field of a request, as Markdown (docs/request-fields.md).
std::string RequestFieldsMarkdown();

class Server {
 public:
  // The engine must outlive the server.
  static Expected<std::unique_ptr<Server>> Create(const Engine& engine, const ServerOptions& o);
  ~Server();

  // Binds the socket; then port() is the port bound.
  Status Bind();
  int port() const;
  // Serves until Stop() (from another thread or a signal handler's thread).
  Status Run();
  void Stop();

  struct Impl;

 private:
  Server() = default;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvtrim::server
