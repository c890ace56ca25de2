// POST /v1/completions and /v1/chat/completions, plain and streamed (SSE).
#include <ctime>

#include "io/tokenizer.h"
#include "kv/cache.h"
#include "kvtrim/chat.h"
#include "server/generation.h"
#include "server/impl.h"

namespace kvtrim::server {

namespace {

// What a request runs on: a fresh session or a fork of a stored context.
struct Prepared {
  CompletionRequest req;
  std::shared_ptr<const StoredContext> context;  // null: fresh session
  KvOptions kv;
  std::vector<int> prompt;
  int prev = -1;  // the token before the first generated one
  std::string id;
};

// The prompt's tokens: BOS + text for a fresh session (as kvtrim run), the
// text alone after a stored context.
std::vector<int> PromptTokens(const Engine& e, const CompletionRequest& r, bool continued) {
  const io::Tokenizer& tok = e.tokenizer();
  if (!r.chat) return tok.Encode(r.prompt, !continued);
  ChatPrompt p = FormatChat(e, r.messages);
  return tok.Encode(p.text, !continued && !p.has_bos, p.parse_special);
}

json Usage(const Generation& g, const Prepared& p) {
  json u{{"prompt_tokens", g.prompt_tokens},
         {"completion_tokens", g.completion_tokens},
         {"total_tokens", g.prompt_tokens + g.completion_tokens},
         {"kv_bytes", g.kv_bytes},
         {"kv_bytes_full", g.kv_bytes_full},
         {"kv_bytes_peak", g.kv_bytes_peak},
         {"kv_entries", g.kv_entries}};
  if (p.context) u["context_tokens"] = p.context->tokens;
  return u;
}

json Envelope(const Prepared& p, const std::string& model, bool chunk) {
  const bool chat = p.req.chat;
  return json{{"id", p.id},
              {"object", chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
              {"created", static_cast<int64_t>(std::time(nullptr))},
              {"model", model}};
}

json Choice(const Prepared& p, const std::string& text, const json& finish, bool chunk) {
  json c{{"index", 0}, {"finish_reason", finish}};
  if (!p.req.chat) {
    c["text"] = text;
    c["logprobs"] = nullptr;
  } else if (chunk) {
    c["delta"] = text.empty() && finish.is_null() ? json{{"role", "assistant"}, {"content", ""}} : json{{"content", text}};
  } else {
    c["message"] = {{"role", "assistant"}, {"content", text}};
  }
  return c;
}

json Extra(const Generation& g, const Prepared& p) {
  json x{{"prefill_ms", g.prefill_ms}, {"decode_ms", g.decode_ms}, {"kv", KvJson(p.kv)}};
  if (p.context) x["context_id"] = p.context->id;
  MarkTimings(x, {"prefill_ms", "decode_ms"});
  return x;
}

bool SendEvent(httplib::DataSink& sink, const std::string& data) {
  const std::string ev = "data: " + data + "\n\n";
  return sink.is_writable() && sink.write(ev.data(), ev.size());
}

// Parses and checks the request, finds its context, tokenizes the prompt;
// false (the error sent) when it cannot run.
bool Prepare(Server::Impl& im, const std::string& body, bool chat, Prepared* p, httplib::Response& res) {
  auto parsed = chat ? ParseChatRequest(body) : ParseCompletionRequest(body);
  if (!parsed.ok()) return SendError(res, 400, parsed.error().message), false;
  p->req = std::move(parsed.value());
  const CompletionRequest& r = p->req;
  int64_t position = 0;
  if (!r.context_id.empty()) {
    p->context = im.store.Get(r.context_id);
    if (!p->context)
      return SendError(res, 404, "no stored context '" + r.context_id + "' (deleted or dropped)"), false;
    p->kv = p->context->kv;
    position = p->context->tokens;
    p->prev = p->context->last_token;
  } else {
    auto kv = ResolveKv(im.o.kv, r.kv);
    if (!kv.ok()) return SendError(res, 400, kv.error().message), false;
    p->kv = kv.value();
  }
  p->prompt = PromptTokens(im.engine, r, p->context != nullptr);
  if (!p->prompt.empty()) p->prev = p->prompt.back();
  // As kvtrim run: the last generated token is never fed back.
  const int64_t held = position + static_cast<int64_t>(p->prompt.size());
  if (held + std::max(0, r.max_tokens - 1) > im.Ctx()) {
    SendError(res, 400, "prompt (" + std::to_string(held) + " tokens) + " + std::to_string(r.max_tokens) +
                            " generated tokens exceeds the context length " + std::to_string(im.Ctx()));
    return false;
  }
  p->id = std::string(chat ? "chatcmpl-" : "cmpl-") + std::to_string(im.next_id++);
  return true;
}

// The request's session: a fork of its stored context or a fresh one.
std::shared_ptr<Session> OpenSession(Server::Impl& im, const Prepared& p, httplib::Response& res) {
  if (p.context) {
    auto f = p.context->session->Fork(p.kv);
    if (!f.ok()) return SendError(res, 500, f.error().message), nullptr;
    return std::move(f.value());
  }
  SessionOptions so;
  so.ctx = im.o.ctx;
  so.kv = p.kv;
  auto c = Session::Create(im.engine, so);
  if (!c.ok()) return SendError(res, 400, c.error().message), nullptr;
  return std::move(c.value());
}

void RespondJson(Server::Impl& im, const Prepared& p, Session& s, httplib::Response& res) {
  LiveKv live(im.metrics);
  GenerationHooks hooks;
  hooks.on_step = [&](const Session& ses) { live.Set(static_cast<int64_t>(ses.cache().BytesHeld())); };
  auto g = RunGeneration(s, im.engine.tokenizer(), p.prompt, !p.context, p.prev, p.req, hooks);
  if (!g.ok()) return SendError(res, g.error().code == ErrorCode::kUnreachable ? 400 : 500, g.error().message);
  im.metrics.AddTokens(g->prompt_tokens, g->completion_tokens);
  im.metrics.NoteKvPeak(g->kv_bytes_peak);
  json out = Envelope(p, im.o.model_name, false);
  out["choices"] = json::array({Choice(p, g->text, g->finish_reason, false)});
  if (p.req.return_tokens) out["choices"][0]["tokens"] = g->tokens;
  out["usage"] = Usage(g.value(), p);
  out["kvtrim"] = Extra(g.value(), p);
  res.set_content(Dump(out), "application/json");
}

// Server-sent events: the lease and session live in the provider, which
// runs once after the handler returns (on the same connection thread).
void RespondStream(Server::Impl& im, std::shared_ptr<const Prepared> p, std::shared_ptr<Session> s,
                   std::shared_ptr<Scheduler::Lease> lease, httplib::Response& res) {
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider("text/event-stream", [&im, p, s, lease](size_t, httplib::DataSink& sink) {
    const std::string& model = im.o.model_name;
    LiveKv live(im.metrics);
    if (p->req.chat) {  // the role first, as OpenAI streams it
      json first = Envelope(*p, model, true);
      first["choices"] = json::array({Choice(*p, "", nullptr, true)});
      SendEvent(sink, Dump(first));
    }
    GenerationHooks hooks;
    hooks.on_step = [&](const Session& ses) { live.Set(static_cast<int64_t>(ses.cache().BytesHeld())); };
    hooks.on_text = [&](const std::string& text) {
      json ev = Envelope(*p, model, true);
      ev["choices"] = json::array({Choice(*p, text, nullptr, true)});
      return SendEvent(sink, Dump(ev));
    };
    auto g = RunGeneration(*s, im.engine.tokenizer(), p->prompt, !p->context, p->prev, p->req, hooks);
    if (!g.ok()) {
      SendEvent(sink, Dump(json{{"error", {{"message", g.error().message}, {"type", "server_error"}}}}));
    } else {
      im.metrics.AddTokens(g->prompt_tokens, g->completion_tokens);
      im.metrics.NoteKvPeak(g->kv_bytes_peak);
      json last = Envelope(*p, model, true);
      last["choices"] = json::array({Choice(*p, "", g->finish_reason, true)});
      if (p->req.return_tokens) last["choices"][0]["tokens"] = g->tokens;
      last["usage"] = Usage(g.value(), *p);
      last["kvtrim"] = Extra(g.value(), *p);
      SendEvent(sink, Dump(last));
    }
    SendEvent(sink, "[DONE]");
    sink.done();
    return true;
  });
}

}  // namespace

void Server::Impl::Completion(const httplib::Request& req, httplib::Response& res, bool chat) {
  auto p = std::make_shared<Prepared>();
  if (!Prepare(*this, req.body, chat, p.get(), res)) return;
  std::shared_ptr<Scheduler::Lease> lease = sched.Acquire();
  if (!lease) return SendError(res, 503, "server busy: the request queue is full, retry later");
  std::shared_ptr<Session> s = OpenSession(*this, *p, res);
  if (!s) return;
  s->UsePool(lease->pool());
  if (p->req.stream) return RespondStream(*this, p, s, lease, res);
  RespondJson(*this, *p, *s, res);
}

}  // namespace kvtrim::server
