#include "kvtrim/server.h"

#include "engine/engine_impl.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <ctime>

#include "kvtrim/clock.h"
#include "io/tokenizer.h"
#include "kv/cache.h"
#include "kv/compressor.h"
#include "model/config.h"
#include "server/connection_queue.h"
#include "server/impl.h"

namespace kvtrim::server {

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void SendError(httplib::Response& res, int status, const std::string& message) {
  const char* type = "invalid_request_error";
  if (status == 404) type = "not_found_error";
  else if (status == 503) type = "server_overloaded";
  else if (status >= 500) type = "server_error";
  res.status = status;
  res.set_content(Dump(json{{"error", {{"message", message}, {"type", type}, {"code", status}}}}), "application/json");
}

json KvJson(const KvOptions& kv) {
  json j{{"policy", kv.policy}, {"quant", kv.quant}, {"params", kv.params}};
  if (kv.budget_tokens > 0) j["budget"] = kv.budget_tokens;
  else j["ratio"] = kv.ratio;
  return j;
}

void MarkTimings(json& x, const std::vector<std::string>& fields) {
  json below = json::array();
  for (const auto& f : fields)
    if (x.contains(f) && x[f].is_number() && BelowResolutionMs(x[f].get<double>())) below.push_back(f);
  x["clock_step_ms"] = SteadyClock().step_ns * 1e-6;
  x["below_clock_resolution"] = below;
}

int Server::Impl::Ctx() const { return o.ctx > 0 ? o.ctx : engine.impl().config().ctx; }

Metrics::Gauges Server::Impl::Gauges() const {
  Metrics::Gauges g;
  g.queue_depth = sched.queued();
  g.active = sched.active();
  g.parallel = sched.parallel();
  g.rejected = sched.rejected();
  g.store_bytes = store.bytes();
  g.store_capacity = store.capacity();
  g.store_contexts = store.size();
  g.store_evicted = store.evicted();
  return g;
}

namespace {

json ContextJson(const StoredContext& c) {
  json j{{"id", c.id},
              {"object", "context"},
              {"tokens", c.tokens},
              {"kv_bytes", c.kv_bytes},
              {"kv_bytes_full", c.kv_bytes_full},
              {"kv_bytes_peak", c.kv_bytes_peak},
              {"kv_bytes_held", c.bytes_held},
              {"prefill_ms", c.prefill_ms},
              {"compress_ms", c.compress_ms},
              {"kv", KvJson(c.kv)}};
  MarkTimings(j, {"prefill_ms", "compress_ms"});
  return j;
}

}  // namespace

// A stored context over a prefilled and compressed session (at least one
// token): its tokens, the bytes its entries occupy and hold, its peak.
std::shared_ptr<StoredContext> StoredFrom(std::unique_ptr<Session> s, const KvOptions& kv) {
  auto c = std::make_shared<StoredContext>();
  c->kv = kv;
  c->tokens = static_cast<int>(s->tokens().size());
  c->last_token = s->tokens().back();
  c->kv_bytes = s->impl().cache().BytesUsed();
  c->kv_bytes_full = s->impl().cache().BytesFull();
  c->bytes_held = s->impl().cache().BytesHeld();
  c->kv_bytes_peak = s->peak_kv_bytes();
  c->session = std::move(s);
  return c;
}

// POST /v1/contexts: prefill BOS + text, compress once, store.
void Server::Impl::CreateContext(const std::string& body, httplib::Response& res) {
  auto r = ParseContextRequest(body);
  if (!r.ok()) return SendError(res, 400, r.error().message);
  auto kv = ResolveKv(o.kv, r->kv);
  if (!kv.ok()) return SendError(res, 400, kv.error().message);
  std::vector<int> tokens = engine.impl().tokenizer().Encode(r->text, true);
  if (static_cast<int>(tokens.size()) > Ctx())
    return SendError(res, 400, "text (" + std::to_string(tokens.size()) + " tokens) exceeds the context length " +
                                   std::to_string(Ctx()));
  auto lease = sched.Acquire();
  if (!lease) return SendError(res, 503, "server busy: the request queue is full, retry later");
  SessionOptions so;
  so.ctx = o.ctx;
  so.kv = kv.value();
  auto s = Session::Create(engine, so);
  if (!s.ok()) return SendError(res, 400, s.error().message);
  s.value()->impl().UsePool(lease->pool());
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  Status st = s.value()->Prefill(tokens);
  const auto t1 = Clock::now();
  if (st.ok()) st = s.value()->Compress();
  const auto t2 = Clock::now();
  if (!st.ok()) return SendError(res, st.code() == ErrorCode::kUnreachable ? 400 : 500, st.message());
  s.value()->impl().UsePool(nullptr);  // stored: only forked from now on
  auto c = StoredFrom(std::move(s.value()), kv.value());
  c->prefill_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  c->compress_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();
  metrics.AddTokens(c->tokens, 0);
  metrics.NoteKvPeak(c->kv_bytes_peak);
  auto id = store.Put(c);
  if (!id.ok()) return SendError(res, id.error().code == ErrorCode::kUnavailable ? 503 : 400, id.error().message);
  res.set_content(Dump(ContextJson(*c)), "application/json");
}

// A stored context from its bytes in the store (--context-store): the file's
// KV options, the server's context length; timings of its making are not kept.
Expected<std::shared_ptr<StoredContext>> Server::Impl::LoadStored(const std::string& bytes, const std::string& name) {
  SessionOptions so;
  so.ctx = o.ctx;
  auto s = Session::LoadContextBytes(engine, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), name, so);
  if (!s.ok()) return s.error();
  if (s.value()->tokens().empty()) return MakeError(name + " holds no tokens");
  const KvOptions kv = s.value()->impl().compressor().options();
  return StoredFrom(std::move(s.value()), kv);
}

namespace {

// What cpp-httplib refused a request for, before any handler ran, in words.
std::string RefusalReason(const httplib::Request& req, int status, size_t max_body) {
  switch (status) {
    case 404:
      return "no route " + req.method + " " + req.path +
             " (routes: GET /health, /metrics, /v1/models, /props, /v1/contexts[/ID], /v1/conversations[/ID]; "
             "/slots; POST /v1/completions, /v1/chat/completions, /completion, /tokenize, /detokenize, /v1/contexts, "
             "/v1/conversations, /slots/ID?action=save|restore|erase; DELETE /v1/contexts/ID, /v1/conversations/ID)";
    case 413:
      return "request body over the limit of " + std::to_string(max_body) + " bytes (kvtrim serve --max-body-mib)";
    case 414:
      return "request line too long";
    case 400:
      return "malformed HTTP request";
    default:
      return "HTTP error " + std::to_string(status) + " on " + req.method + " " + req.path;
  }
}

}  // namespace

// A POST handler that reads the body whatever its Content-Type says.
// cpp-httplib parses a form-encoded body (curl -d's default type) into
// parameters itself and refuses one over 8 KB, a limit compiled into
// Debian's library, before any plain handler runs; a handler with a content
// reader gets the raw bytes instead, within set_payload_max_length.
httplib::Server::HandlerWithContentReader Server::Impl::WithBody(
    std::function<void(const std::string&, httplib::Response&)> handle) {
  return WithRequestBody([handle](const httplib::Request&, const std::string& body, httplib::Response& res) {
    handle(body, res);
  });
}

httplib::Server::HandlerWithContentReader Server::Impl::WithRequestBody(
    std::function<void(const httplib::Request&, const std::string&, httplib::Response&)> handle) {
  return [this, handle](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& read) {
    if (req.is_multipart_form_data())
      return SendError(res, 415, "a multipart body is not read: send the JSON object itself as the body "
                                 "(curl -d @file.json or --data-binary @file.json)");
    std::string body;
    if (!read([&body](const char* data, size_t n) {
          body.append(data, n);
          return true;
        })) {
      const int status = res.status >= 400 ? res.status : 400;
      return SendError(res, status, RefusalReason(req, status, o.max_body_bytes));
    }
    handle(req, body, res);
  };
}

void Server::Impl::Routes() {
  http.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    json m{{"id", o.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "kvtrim"},
           {"meta", {{"ctx", Ctx()}, {"vocab", engine.impl().config().vocab}, {"kv_default", KvJson(o.kv)}}}};
    res.set_content(Dump(json{{"object", "list"}, {"data", json::array({m})}}), "application/json");
  });
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.Render(Gauges()), "text/plain; version=0.0.4");
  });
  http.Post("/v1/completions",
            WithBody([this](const std::string& b, httplib::Response& r) { Completion(b, r, Api::kCompletions); }));
  http.Post("/v1/chat/completions",
            WithBody([this](const std::string& b, httplib::Response& r) { Completion(b, r, Api::kChat); }));
  // llama-server's own API (docs/server.md "llama-server's endpoints").
  http.Post("/completion", WithBody([this](const std::string& b, httplib::Response& r) { Completion(b, r, Api::kLlama); }));
  http.Post("/tokenize", WithBody([this](const std::string& b, httplib::Response& r) { Tokenize(b, r); }));
  http.Post("/detokenize", WithBody([this](const std::string& b, httplib::Response& r) { Detokenize(b, r); }));
  http.Get("/props", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(Dump(Props()), "application/json");
  });
  http.Get("/slots", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(Dump(Slots()), "application/json");
  });
  http.Post(R"(/slots/(\d{1,6}))", WithRequestBody([this](const httplib::Request& req, const std::string& b,
                                                           httplib::Response& r) {
    SlotAction(std::stoi(req.matches[1]), req.get_param_value("action"), b, r);
  }));
  ConversationRoutes();
  http.Post("/v1/contexts", WithBody([this](const std::string& b, httplib::Response& r) { CreateContext(b, r); }));
  http.Get("/v1/contexts", [this](const httplib::Request&, httplib::Response& res) {
    json data = json::array();
    for (const auto& id : store.Ids())  // those only in the backend (--context-store) are listed, not loaded
      if (auto c = store.Peek(id)) data.push_back(ContextJson(*c));
      else data.push_back({{"id", id}, {"object", "context"}, {"in_memory", false}});
    res.set_content(Dump(json{{"object", "list"}, {"data", data}, {"bytes", store.bytes()}}), "application/json");
  });
  http.Get(R"(/v1/contexts/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    auto c = store.Get(req.matches[1]);
    if (!c) return SendError(res, 404, "no stored context '" + std::string(req.matches[1]) + "' (deleted or dropped)");
    res.set_content(Dump(ContextJson(*c)), "application/json");
  });
  http.Delete(R"(/v1/contexts/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.matches[1];
    if (!store.Erase(id)) return SendError(res, 404, "no stored context '" + id + "' (deleted or dropped)");
    res.set_content(Dump(json{{"id", id}, {"object", "context"}, {"deleted", true}}), "application/json");
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    SendError(res, 500, what);
  });
  http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (res.body.empty()) SendError(res, res.status, RefusalReason(req, res.status, o.max_body_bytes));
  });
  http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    std::string route = req.path.rfind("/v1/contexts/", 0) == 0        ? "/v1/contexts/{id}"
                        : req.path.rfind("/v1/conversations/", 0) == 0 ? "/v1/conversations/{id}"
                                                                       : req.path;
    if (req.path.rfind("/slots/", 0) == 0) route = "/slots/{id}";
    static const char* const kRoutes[] = {"/health", "/metrics", "/v1/models", "/v1/completions", "/slots", "/slots/{id}",
                                          "/v1/chat/completions", "/v1/contexts", "/v1/contexts/{id}",
                                          "/v1/conversations", "/v1/conversations/{id}", "/completion",
                                          "/tokenize", "/detokenize", "/props"};
    if (std::find(std::begin(kRoutes), std::end(kRoutes), route) == std::end(kRoutes)) route = "other";
    metrics.CountRequest(req.method + " " + route, res.status);
  });
}

Expected<std::unique_ptr<Server>> Server::Create(const Engine& engine, const ServerOptions& o) {
  if (o.parallel < 1) return MakeError("--parallel must be >= 1");
  if (o.max_body_bytes < 1) return MakeError("the request body limit must be at least 1 byte");
  if (o.queue < 0) return MakeError("--queue must be >= 0");
  if (o.ctx < 0 || o.ctx > engine.impl().config().ctx)
    return MakeError("context length must be in [0, " + std::to_string(engine.impl().config().ctx) + "]");
  {
    KvOverrides none;
    auto kv = ResolveKv(o.kv, none);
    if (!kv.ok()) return kv.error();
  }
  // One pool per slot: a ThreadPool serves one caller at a time.
  const int threads = o.threads > 0 ? o.threads : engine.threads();
  const int per_slot = o.parallel == 1 ? 0 : std::max(1, threads / o.parallel);
  std::unique_ptr<Server> s(new Server());
  s->impl_ = std::make_unique<Impl>(engine, o, per_slot);
  Impl& im = *s->impl_;
  im.slot_sessions.resize(static_cast<size_t>(o.parallel));
  if (!o.context_store.empty()) {
    auto b = OpenContextBackend(o.context_store, o.context_store_disk_bytes);
    if (!b.ok()) return b.error();
    im.store.UseBackend(std::move(b.value()), [&im](const std::string& bytes, const std::string& name) {
      return im.LoadStored(bytes, name);
    });
    auto cb = OpenContextBackend(o.context_store, 0, "conv");  // never bounded: a conversation is never dropped
    if (!cb.ok()) return cb.error();
    im.convs.UseBackend(
        std::move(cb.value()),
        [&im](const std::string& bytes, const std::string& name) { return im.LoadConversation(bytes, name); },
        o.conversations_in_memory);
  } else {
    im.convs.LimitInMemory(o.conversations_in_memory);
  }
  im.Routes();
  // Enough connection threads that every decoding and queued request has one,
  // and a few more answer 503 / health / metrics meanwhile; as many
  // connections may wait for one; beyond that, 503 at once (ConnectionQueue).
  const size_t conn_threads = static_cast<size_t>(o.parallel + o.queue + 4);
  im.http.new_task_queue = [conn_threads] { return new ConnectionQueue(conn_threads, conn_threads); };
  im.http.set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!ConnectionQueue::Overflowing() || req.path == "/health" || req.path == "/metrics")
      return httplib::Server::HandlerResponse::Unhandled;
    SendError(res, 503, "server busy: every connection thread is taken, retry later");
    res.set_header("Connection", "close");
    return httplib::Server::HandlerResponse::Handled;
  });
  im.http.set_payload_max_length(o.max_body_bytes);
  im.http.set_keep_alive_max_count(100);
  im.http.set_keep_alive_timeout(o.keep_alive_s);
  return s;
}

Server::~Server() {
  if (impl_) impl_->http.stop();
}

Status Server::Bind() {
  Impl& im = *impl_;
  if (im.o.port == 0) im.port = im.http.bind_to_any_port(im.o.host);
  else im.port = im.http.bind_to_port(im.o.host, im.o.port) ? im.o.port : -1;
  if (im.port < 0) return MakeError("cannot bind " + im.o.host + ":" + std::to_string(im.o.port));
  return {};
}

int Server::port() const { return impl_->port; }

Status Server::Run() {
  if (impl_->port < 0) KVTRIM_RETURN_IF_ERROR(Bind());
  if (!impl_->http.listen_after_bind()) return MakeError("the server stopped listening with an error");
  return {};
}

void Server::Stop() { impl_->http.stop(); }

}  // namespace kvtrim::server
