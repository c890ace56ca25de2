// `kvtrim serve`: the HTTP server (src/server, docs/server.md).
#include <malloc.h>
#include <pthread.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "checks.h"
#include "model_flags.h"
#include "commands.h"
#include "kv_flags.h"
#include "kvtrim/engine.h"
#include "kvtrim/server.h"

namespace kvtrim::cli {

namespace {

struct ServeOpts {
  RopeOverrides rope;
  std::string model, host = "127.0.0.1";
  int port = 8080, threads = 0, parallel = 1, queue = 16, ctx = 0, keep_alive = 2;
  double store_mib = 256, store_gib = 0;
  int conversations_in_memory = 64;
  bool request_fields = false;
  double max_body_mib = 64;
  std::string store_dir;
  KvFlags kv;
};

int ServeAction(ServeOpts& o) {
  if (o.request_fields) {
    std::fputs(server::RequestFieldsMarkdown().c_str(), stdout);
    return 0;
  }
  if (Status st = ApplyCacheTypes(&o.kv); !st.ok()) {
    std::fprintf(stderr, "kvtrim serve: %s\n", st.message().c_str());
    return 1;
  }
  // glibc gives each thread that allocates its own arena and keeps what is
  // freed there: with a connection thread per request, resident memory grew
  // ~8 MiB per 1K-token request until every thread had one (docs/server.md).
  // A few arenas keep it flat.
  mallopt(M_ARENA_MAX, std::max(2, o.parallel));
  std::unique_ptr<Engine> engine = LoadEngine("serve", o.model, o.threads, o.rope, o.ctx);
  if (!engine) return 1;
  server::ServerOptions so;
  so.host = o.host;
  so.port = o.port;
  so.threads = o.threads;
  so.parallel = o.parallel;
  so.queue = o.queue;
  so.keep_alive_s = o.keep_alive;
  so.ctx = o.ctx;
  so.max_body_bytes = static_cast<size_t>(o.max_body_mib * 1048576.0);
  so.context_store_bytes = static_cast<size_t>(o.store_mib * 1048576.0);
  so.context_store = o.store_dir;
  so.context_store_disk_bytes = static_cast<uint64_t>(o.store_gib * 1073741824.0);
  so.conversations_in_memory = o.conversations_in_memory;
  so.kv = ToKvOptions(o.kv, o.kv.kv.policy);
  so.model_name = std::filesystem::path(o.model).filename().string();
  auto srv = server::Server::Create(*engine, so);
  if (!srv.ok()) {
    std::fprintf(stderr, "kvtrim serve: %s\n", srv.error().message.c_str());
    return 1;
  }
  if (Status st = srv.value()->Bind(); !st.ok()) {
    std::fprintf(stderr, "kvtrim serve: %s\n", st.message().c_str());
    return 1;
  }
  // SIGINT/SIGTERM stop the server from a thread of its own (blocked everywhere else).
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  server::Server* s = srv.value().get();
  std::thread waiter([&sigs, s] {
    int sig = 0;
    sigwait(&sigs, &sig);
    if (sig != 0) s->Stop();
  });
  std::fprintf(stderr, "kvtrim serve: %s on http://%s:%d (parallel %d, queue %d, kv %s)\n", so.model_name.c_str(),
               so.host.c_str(), s->port(), so.parallel, so.queue, so.kv.policy.c_str());
  Status st = s->Run();
  pthread_kill(waiter.native_handle(), SIGTERM);  // wakes the waiter when Run ended on its own
  waiter.join();
  if (!st.ok()) {
    std::fprintf(stderr, "kvtrim serve: %s\n", st.message().c_str());
    return 1;
  }
  return 0;
}

}  // namespace

Command AddServe(CLI::App& app) {
  auto o = std::make_shared<ServeOpts>();
  o->model = DefaultModelPath();
  CLI::App* sub = app.add_subcommand(
      "serve", "OpenAI-style HTTP server: completions, chat, and contexts compressed once and questioned many times");
  sub->add_option("-m,--model", o->model, "GGUF model file")->capture_default_str();
  sub->add_option("--host", o->host, "Address to listen on")->capture_default_str();
  sub->add_option("--port", o->port, "Port (0: any free port, printed at start)")->capture_default_str()->check(
      CLI::Range(0, 65535));
  sub->add_option("-t,--threads", o->threads, "Threads in all, split among the --parallel slots (0: all cores)")
      ->capture_default_str()
      ->check(NonNegative());
  AddRopeFlags(sub, &o->rope);
  sub->add_option("--parallel", o->parallel, "Requests running the model at once (each slot has its own threads)")
      ->capture_default_str()
      ->check(Positive());
  sub->add_option("--queue", o->queue, "Requests waiting for a slot at most; more are answered 503")
      ->capture_default_str()
      ->check(NonNegative());
  sub->add_option("--keep-alive-s", o->keep_alive,
                  "An idle keep-alive connection is closed after this many seconds (it holds a connection thread)")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  sub->add_option("--context-store-mib", o->store_mib,
                  "Bound of the stored contexts' KV bytes (least recently used dropped first)")
      ->capture_default_str()
      ->check(Positive());
  sub->add_option("--context-store", o->store_dir,
                  "Also keep every stored context in DIR (one context file each, docs/context-file.md) or in "
                  "redis://HOST:PORT (shared by replicas): written before it is acknowledged, loaded on demand, "
                  "listed after a restart; memory caches it");
  sub->add_option("--context-store-gib", o->store_gib,
                  "Bound of a --context-store directory's files in GiB, least recently used dropped first (0: none; "
                  "bound Redis with its maxmemory)")
      ->capture_default_str()
      ->check(NonNegative());
  sub->add_option("--conversations-in-memory", o->conversations_in_memory,
                  "Conversations kept in memory at most: with --context-store the least recently used idle ones "
                  "are dropped and read back from the store when next named; without one a new conversation "
                  "beyond it is refused (503) until one is deleted")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  AddCtxFlag(sub, &o->ctx, "Context length of every session (0: the model's; past its trained context with RoPE "
             "scaling, e.g. --rope-scaling yarn --rope-scale 4)");
  sub->add_option("--max-body-mib", o->max_body_mib, "Largest request body taken (a larger one gets 413)")
      ->capture_default_str()
      ->check(Positive());
  sub->add_flag("--request-fields", o->request_fields,
                "Print every request field (Markdown: docs/request-fields.md) and exit");
  UseServingDefaults(&o->kv);
  AddKvFlags(sub, &o->kv, true, false);
  AddCacheTypeFlags(sub, &o->kv);
  return {sub, [o]() { return ServeAction(*o); }};
}

}  // namespace kvtrim::cli
