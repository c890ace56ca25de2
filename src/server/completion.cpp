// POST /v1/completions, /v1/chat/completions and llama-server's /completion, plain and streamed (SSE).
#include <algorithm>
#include <chrono>
#include <ctime>
#include <unordered_set>

#include "engine/engine_impl.h"
#include "io/tokenizer.h"
#include "kv/cache.h"
#include "kvtrim/chat.h"
#include "server/generation.h"
#include "server/impl.h"
#include "server/prompt_cache.h"

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
  // cache_prompt: the prompt tokens a stored prompt gave (context is then
  // that prompt), or the id to store this prompt under when none did.
  int reused = 0;
  std::string cache_as;
  // "conversation": the turn, held from arrival until its answer is stored.
  std::shared_ptr<ConversationTurn> turn;
  std::vector<ChatMessage> added;
  size_t answer_room = 0;  // a conversation's turn: the answer's tokens, when it must make room for them
  int slot = 0;  // the scheduler's slot it runs on (llama-server's id_slot)
};

// What storing the compressed prompt gave (cache_prompt), for the response.
struct CacheNote {
  bool stored = false;
  std::string error;
  double store_ms = 0;
};

// The prompt's tokens: BOS + text for a fresh session (as kvtrim run), the
// text alone after a stored context.
std::vector<int> PromptTokens(const Engine& e, const CompletionRequest& r, bool continued) {
  const io::Tokenizer& tok = e.impl().tokenizer();
  if (!r.chat) return tok.Encode(r.prompt, !continued);
  ChatPrompt p = FormatChat(e, r.messages);
  return tok.Encode(p.text, !continued && !p.has_bos, p.parse_special);
}

json Usage(const Generation& g, const Prepared& p) {
  const int prompt = g.prompt_tokens + p.reused;  // a cached prompt's tokens count as the prompt's
  json u{{"prompt_tokens", prompt},
         {"completion_tokens", g.completion_tokens},
         {"total_tokens", prompt + g.completion_tokens},
         {"kv_bytes", g.kv_bytes},
         {"kv_bytes_full", g.kv_bytes_full},
         {"kv_bytes_peak", g.kv_bytes_peak},
         {"kv_entries", g.kv_entries}};
  if (p.req.cache_prompt) u["prompt_tokens_details"] = {{"cached_tokens", p.reused}};  // OpenAI's field
  else if (p.context) u["context_tokens"] = p.context->tokens;
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

json Extra(const Generation& g, const Prepared& p, const CacheNote& note) {
  json x{{"prefill_ms", g.prefill_ms}, {"decode_ms", g.decode_ms}, {"kv", KvJson(p.kv)}};
  if (p.req.cache_prompt) {
    json c{{"reused_tokens", p.reused}, {"stored", note.stored}, {"store_ms", note.store_ms}};
    c["id"] = p.reused > 0 ? p.context->id : p.cache_as;
    if (!note.error.empty()) c["error"] = note.error;
    x["prompt_cache"] = c;
  } else if (p.context) {
    x["context_id"] = p.context->id;
  } else if (p.turn) {
    ConversationEntry& e = p.turn->entry();
    std::lock_guard<std::mutex> lk(e.info_mu);
    x["conversation"] = e.info;
  }
  MarkTimings(x, {"prefill_ms", "decode_ms"});
  return x;
}

bool SendEvent(httplib::DataSink& sink, const std::string& data) {
  const std::string ev = "data: " + data + "\n\n";
  return sink.is_writable() && sink.write(ev.data(), ev.size());
}

// Whether the prompt begins with every one of the tokens t (at least one).
bool Extends(const std::vector<int>& prompt, const std::vector<int>& t) {
  return !t.empty() && t.size() <= prompt.size() && std::equal(t.begin(), t.end(), prompt.begin());
}

// Makes c, a session whose tokens begin the prompt (Extends), the request's
// context: only the rest of the prompt is prefilled.
void ContinueFrom(std::shared_ptr<const StoredContext> c, Prepared* p) {
  p->reused = static_cast<int>(c->session->tokens().size());
  p->prev = c->last_token;
  p->context = std::move(c);
  p->prompt.erase(p->prompt.begin(), p->prompt.begin() + static_cast<std::ptrdiff_t>(p->reused));
}

// cache_prompt: the longest stored prompt this one begins with becomes the
// request's context and only the rest is prefilled (its token count
// returned); with none, the id to store this prompt under is noted.
int64_t UseCachedPrompt(Server::Impl& im, Prepared* p) {
  const std::vector<std::string> ids = PromptPrefixIds(ContextIdentity(im.engine, p->kv), p->prompt);
  std::unordered_set<std::string> have;
  for (auto& id : im.store.Ids())
    if (id.rfind("prompt-", 0) == 0) have.insert(std::move(id));
  const size_t k = LongestStoredPrefix(ids, have);
  if (k > 0) {
    auto c = im.store.Get(ids[k - 1]);
    // The tokens themselves, not only their hash, must match.
    if (c && c->session->tokens().size() == k && Extends(p->prompt, c->session->tokens())) {
      ContinueFrom(std::move(c), p);
      return static_cast<int64_t>(k);
    }
  }
  if (!ids.empty()) p->cache_as = ids.back();
  return 0;
}

// id_slot with cache_prompt (llama-server's slot cache): the slot's last
// session (its prompt and answer, or a context restored into it) becomes
// the request's context when this prompt begins with every token it holds
// and the KV options are the same; only the rest is prefilled.
bool UseSlotSession(Server::Impl& im, Prepared* p) {
  const std::shared_ptr<Session> held = im.SlotSession(p->req.id_slot);
  if (!held || !Extends(p->prompt, held->tokens())) return false;
  if (ContextIdentity(im.engine, held->kv_options()) != ContextIdentity(im.engine, p->kv)) return false;
  auto f = held->Fork(p->kv);
  if (!f.ok()) return false;
  f.value()->impl().UsePool(nullptr);  // the request's fork of it takes the slot's pool
  auto c = StoredFrom(std::move(f.value()), p->kv);
  c->id = "slot-" + std::to_string(p->req.id_slot);
  ContinueFrom(std::move(c), p);
  return true;
}

// Parses and checks the request, finds its context, tokenizes the prompt;
// false (the error sent) when it cannot run.
bool Prepare(Server::Impl& im, const std::string& body, Server::Impl::Api api, Prepared* p, httplib::Response& res) {
  using Api = Server::Impl::Api;
  auto parsed = api == Api::kChat ? ParseChatRequest(body)
                : api == Api::kLlama ? ParseLlamaCompletionRequest(body) : ParseCompletionRequest(body);
  if (!parsed.ok()) return SendError(res, 400, parsed.error().message), false;
  p->req = std::move(parsed.value());
  const bool chat = p->req.chat;
  const CompletionRequest& r = p->req;
  int64_t position = 0;
  if (!r.context_id.empty()) {
    p->context = im.store.Get(r.context_id);
    if (!p->context)
      return SendError(res, 404, "no stored context '" + r.context_id + "' (deleted or dropped)"), false;
    p->kv = p->context->kv;
    position = p->context->tokens;
    p->prev = p->context->last_token;
  } else if (!r.conversation.empty()) {
    int status = 400;
    auto plan = im.PlanTurn(r, &status);  // waits for the conversation's earlier turns
    if (!plan.ok()) return SendError(res, status, plan.error().message), false;
    p->turn = std::move(plan->turn);
    p->added = std::move(plan->added);
    p->prompt = std::move(plan->tokens);
    const Session& s = p->turn->entry().conv->session();
    p->kv = s.kv_options();
    position = s.rope_position();
  } else {
    auto kv = ResolveKv(im.o.kv, r.kv);
    if (!kv.ok()) return SendError(res, 400, kv.error().message), false;
    p->kv = kv.value();
  }
  if (!p->turn) p->prompt = PromptTokens(im.engine, r, p->context != nullptr);
  if (r.cache_prompt && !p->turn && !p->context && r.id_slot >= 0 && UseSlotSession(im, p)) position = p->reused;
  else if (r.cache_prompt) position = UseCachedPrompt(im, p);
  if (!p->prompt.empty()) p->prev = p->prompt.back();
  // As kvtrim run: the last generated token is never fed back.
  const int64_t held = position + static_cast<int64_t>(p->prompt.size());
  if (r.max_tokens < 0) {  // n_predict -1: until EOS or the context is full
    if (held >= im.Ctx()) {
      SendError(res, 400, "prompt (" + std::to_string(held) + " tokens) fills the context length " + std::to_string(im.Ctx()));
      return false;
    }
    p->req.max_tokens = static_cast<int>(im.Ctx() - held + 1);
  }
  const int answer = std::max(0, r.max_tokens - 1);
  if (held + answer > im.Ctx()) {
    // A conversation makes room (Conversation::BeginTurn re-bases it): only
    // the turn itself must fit, beside the two positions a re-base keeps.
    if (p->turn && static_cast<int64_t>(p->prompt.size()) + answer + 2 <= im.Ctx()) {
      p->answer_room = static_cast<size_t>(answer);
    } else {
      SendError(res, 400, "prompt (" + std::to_string(held) + " tokens) + " + std::to_string(r.max_tokens) +
                              " generated tokens exceeds the context length " + std::to_string(im.Ctx()));
      return false;
    }
  }
  p->id = std::string(chat ? "chatcmpl-" : "cmpl-") + std::to_string(im.next_id++);
  return true;
}

// Stores the request's compressed prompt (cache_prompt, no stored prefix):
// a fork of the session as it is after prefill and compression.
CacheNote StorePrompt(Server::Impl& im, const Prepared& p, const Session& s) {
  CacheNote note;
  const auto t0 = std::chrono::steady_clock::now();
  auto f = s.Fork(p.kv);
  Status st = f.ok() ? Status() : Status(f.error());
  if (st.ok()) {
    f.value()->impl().UsePool(nullptr);  // stored: only forked from now on
    auto c = StoredFrom(std::move(f.value()), p.kv);
    st = im.store.PutAs(p.cache_as, c);
  }
  note.store_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  note.stored = st.ok();
  if (!st.ok()) note.error = st.message();
  return note;
}

// The hook that stores the prompt when the request asks and none was reused.
void StoreHook(Server::Impl& im, const Prepared& p, GenerationHooks& hooks, CacheNote* note) {
  if (!p.req.cache_prompt || p.reused > 0 || p.cache_as.empty()) return;
  hooks.on_prefilled = [&im, &p, note](const Session& s) { *note = StorePrompt(im, p, s); };
}

// A conversation's turn: its prefill is Conversation::BeginTurn.
void TurnHook(const Prepared& p, GenerationHooks& hooks) {
  if (!p.turn) return;
  hooks.prefill = [&p] { return p.turn->entry().conv->BeginTurn(p.added, p.prompt, p.answer_room); };
}

// After a conversation's turn: the answer appended and stored (an error
// when it could not be), or after a failure the conversation read back.
Status EndTurn(Server::Impl& im, const Prepared& p, const Status& st, const Generation& g) {
  if (!p.turn) return {};
  if (!st.ok()) return im.FailTurn(*p.turn), Status();
  return im.FinishTurn(*p.turn, g);
}

// The request's session: a fork of its stored context, a conversation's own or a fresh one.
std::shared_ptr<Session> OpenSession(Server::Impl& im, const Prepared& p, httplib::Response& res) {
  if (p.turn) {
    std::shared_ptr<Conversation> c = p.turn->entry().conv;
    return std::shared_ptr<Session>(c, &c->session());
  }
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

// llama-server's report of the request (POST /completion).
LlamaAnswerInfo LlamaInfo(const Server::Impl& im, const Prepared& p) {
  LlamaAnswerInfo info;
  info.prompt_n = static_cast<int>(p.prompt.size()) + p.reused;
  std::vector<int> all = p.context ? p.context->session->tokens() : std::vector<int>();
  all.insert(all.end(), p.prompt.begin(), p.prompt.end());
  info.prompt_text = VerbatimText(im.engine.impl().tokenizer(), all);
  info.model = im.o.model_name;
  info.request = &p.req;
  info.slot = p.slot;
  return info;
}

// The response object of a finished completion.
json CompletionJson(Server::Impl& im, const Prepared& p, const Generation& g, const CacheNote& note) {
  if (p.req.llama) {
    json out = LlamaCompletionJson(g, g.text, LlamaInfo(im, p));
    if (p.req.return_tokens) out["tokens"] = g.tokens;
    out["kvtrim"] = Extra(g, p, note);
    return out;
  }
  json out = Envelope(p, im.o.model_name, false);
  out["choices"] = json::array({Choice(p, g.text, g.finish_reason, false)});
  if (p.req.return_tokens) out["choices"][0]["tokens"] = g.tokens;
  out["usage"] = Usage(g, p);
  out["kvtrim"] = Extra(g, p, note);
  return out;
}

// A non-streamed answer: the prefill runs in the handler (its errors are
// answered with their status); the sampling runs in a content provider,
// while the response is under way, so that it stops when the client went
// away: httplib 0.11's sink.is_writable() peeks at the socket, and the
// handler itself has no way to ask. The body is one JSON object, sent chunked.
void RespondJson(Server::Impl& im, std::shared_ptr<const Prepared> p, std::shared_ptr<Session> s,
                 std::shared_ptr<Scheduler::Lease> lease, httplib::Response& res) {
  auto live = std::make_shared<LiveKv>(im.metrics);
  auto note = std::make_shared<CacheNote>();
  auto g = std::make_shared<Generation>();
  GenerationHooks hooks;
  hooks.on_step = [live](const Session& ses) { live->Set(static_cast<int64_t>(ses.impl().cache().BytesHeld())); };
  StoreHook(im, *p, hooks, note.get());
  TurnHook(*p, hooks);
  Status st = PrefillPrompt(*s, p->prompt, !p->context, hooks, g.get());
  if (!st.ok()) {
    (void)EndTurn(im, *p, st, *g);
    return SendError(res, st.code() == ErrorCode::kUnreachable ? 400 : 500, st.message());
  }
  res.set_chunked_content_provider("application/json", [&im, p, s, lease, live, note, g, hooks](size_t, httplib::DataSink& sink) mutable {
    GenerationHooks h = hooks;  // the same live-KV step; the prompt was stored already
    h.alive = [&sink] { return sink.is_writable(); };
    Status st = SampleAnswer(*s, im.engine.impl().tokenizer(), p->prev, p->req, h, g.get());
    const Status stored = EndTurn(im, *p, st, *g);  // a conversation's answer is stored before it is sent
    if (st.ok() && !p->turn) im.KeepSlotSession(lease->slot(), s);  // /slots?action=save
    // Done with the model before the answer goes out: a client that reads
    // it and then the metrics sees this session gone and the slot free.
    live->Set(0);
    lease.reset();
    std::string body;
    if (!st.ok()) {
      body = Dump(json{{"error", {{"message", st.message()}, {"type", "server_error"}, {"code", 500}}}});
    } else if (!stored.ok()) {
      body = Dump(json{{"error", {{"message", stored.message()}, {"type", "server_overloaded"}, {"code", 503}}}});
    } else if (g->finish_reason == "abandoned") {
      im.metrics.CountAbandoned();
      return false;  // the client is gone: close the connection
    } else {
      im.metrics.AddTokens(g->prompt_tokens, g->completion_tokens);
      im.metrics.NoteKvPeak(g->kv_bytes_peak);
      body = Dump(CompletionJson(im, *p, *g, *note));
    }
    sink.write(body.data(), body.size());
    sink.done();
    return true;
  });
}

// A conversation's turn, not streamed: sampled in the handler, so that the
// answer's status says whether the turn was stored (a 200 only once it
// is); a client that goes away meanwhile is not noticed until the end.
void RespondTurnJson(Server::Impl& im, const Prepared& p, Session& s, httplib::Response& res) {
  LiveKv live(im.metrics);
  Generation g;
  GenerationHooks hooks;
  hooks.on_step = [&live](const Session& ses) { live.Set(static_cast<int64_t>(ses.impl().cache().BytesHeld())); };
  TurnHook(p, hooks);
  Status st = PrefillPrompt(s, p.prompt, true, hooks, &g);
  if (st.ok()) st = SampleAnswer(s, im.engine.impl().tokenizer(), p.prev, p.req, hooks, &g);
  const Status stored = EndTurn(im, p, st, g);
  live.Set(0);
  if (!st.ok()) return SendError(res, st.code() == ErrorCode::kUnreachable ? 400 : 500, st.message());
  if (!stored.ok()) return SendError(res, 503, stored.message());
  im.metrics.AddTokens(g.prompt_tokens, g.completion_tokens);
  im.metrics.NoteKvPeak(g.kv_bytes_peak);
  res.set_content(Dump(CompletionJson(im, p, g, CacheNote())), "application/json");
}

// Server-sent events: the lease and session live in the provider, which
// runs once after the handler returns (on the same connection thread).
void RespondStream(Server::Impl& im, std::shared_ptr<const Prepared> p, std::shared_ptr<Session> s,
                   std::shared_ptr<Scheduler::Lease> lease, httplib::Response& res) {
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider("text/event-stream", [&im, p, s, lease](size_t, httplib::DataSink& sink) mutable {
    const std::string& model = im.o.model_name;
    LiveKv live(im.metrics);
    if (p->req.chat) {  // the role first, as OpenAI streams it
      json first = Envelope(*p, model, true);
      first["choices"] = json::array({Choice(*p, "", nullptr, true)});
      SendEvent(sink, Dump(first));
    }
    GenerationHooks hooks;
    hooks.on_step = [&](const Session& ses) { live.Set(static_cast<int64_t>(ses.impl().cache().BytesHeld())); };
    hooks.on_text = [&](const std::string& text) {
      if (p->req.llama) return SendEvent(sink, Dump(LlamaChunkJson(text)));
      json ev = Envelope(*p, model, true);
      ev["choices"] = json::array({Choice(*p, text, nullptr, true)});
      return SendEvent(sink, Dump(ev));
    };
    CacheNote note;
    StoreHook(im, *p, hooks, &note);
    TurnHook(*p, hooks);
    auto g = RunGeneration(*s, im.engine.impl().tokenizer(), p->prompt, !p->context, p->prev, p->req, hooks);
    const Status stored = EndTurn(im, *p, g.ok() ? Status() : Status(g.error()), g.ok() ? g.value() : Generation());
    if (g.ok() && !p->turn) im.KeepSlotSession(lease->slot(), s);  // /slots?action=save
    live.Set(0);  // as for a non-streamed answer: the session and its slot are done before the last event
    lease.reset();
    if (!g.ok()) {
      SendEvent(sink, Dump(json{{"error", {{"message", g.error().message}, {"type", "server_error"}}}}));
    } else if (!stored.ok()) {
      SendEvent(sink, Dump(json{{"error", {{"message", stored.message()}, {"type", "server_overloaded"}}}}));
    } else if (g->finish_reason == "abandoned") {
      im.metrics.CountAbandoned();
      return false;  // the client is gone
    } else {
      im.metrics.AddTokens(g->prompt_tokens, g->completion_tokens);
      im.metrics.NoteKvPeak(g->kv_bytes_peak);
      json last;
      if (p->req.llama) {  // llama-server's last event: the whole answer object, its content already sent
        last = LlamaCompletionJson(g.value(), "", LlamaInfo(im, *p));
        if (p->req.return_tokens) last["tokens"] = g->tokens;
      } else {
        last = Envelope(*p, model, true);
        last["choices"] = json::array({Choice(*p, "", g->finish_reason, true)});
        if (p->req.return_tokens) last["choices"][0]["tokens"] = g->tokens;
        last["usage"] = Usage(g.value(), *p);
      }
      last["kvtrim"] = Extra(g.value(), *p, note);
      SendEvent(sink, Dump(last));
    }
    if (!p->req.llama) SendEvent(sink, "[DONE]");
    sink.done();
    return true;
  });
}

}  // namespace

void Server::Impl::Completion(const std::string& body, httplib::Response& res, Api api) {
  auto p = std::make_shared<Prepared>();
  if (!Prepare(*this, body, api, p.get(), res)) return;
  if (p->req.id_slot >= sched.parallel())
    return SendError(res, 400, "field 'id_slot' = " + std::to_string(p->req.id_slot) + " is not a slot: this server has " +
                                   std::to_string(sched.parallel()) + " (--parallel), numbered from 0");
  std::shared_ptr<Scheduler::Lease> lease = sched.Acquire(p->req.id_slot);
  if (!lease) return SendError(res, 503, "server busy: the request queue is full, retry later");
  p->slot = lease->slot();
  std::shared_ptr<Session> s = OpenSession(*this, *p, res);
  if (!s) return;
  s->impl().UsePool(lease->pool());
  if (p->req.stream) return RespondStream(*this, p, s, lease, res);
  if (p->turn) return RespondTurnJson(*this, *p, *s, res);
  RespondJson(*this, p, s, lease, res);
}

}  // namespace kvtrim::server
