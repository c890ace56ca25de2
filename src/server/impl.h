// The server's state and helpers shared by its handler files (private).
#pragma once
#include <httplib.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "server/context_store.h"
#include "server/conversations.h"
#include "server/metrics.h"
#include "server/request.h"
#include "server/scheduler.h"
#include "kvtrim/server.h"

namespace kvtrim::io {
class Tokenizer;
}

namespace kvtrim::server {

using nlohmann::json;

struct Generation;

struct Server::Impl {
  Impl(const Engine& e, const ServerOptions& opts, int threads_per_slot)
      : engine(e), o(opts), sched(opts.parallel, opts.queue, threads_per_slot), store(opts.context_store_bytes) {}

  const Engine& engine;
  ServerOptions o;
  httplib::Server http;
  Scheduler sched;
  ContextStore store;
  ConversationStore convs;
  Metrics metrics;
  std::atomic<int64_t> next_id{1};
  int port = -1;

  void Routes();
  // The completion endpoints: OpenAI's two and llama-server's /completion.
  enum class Api { kCompletions, kChat, kLlama };
  void Completion(const std::string& body, httplib::Response& res, Api api);
  // llama-server's utility endpoints (llama_api.cpp).
  void Tokenize(const std::string& body, httplib::Response& res);
  void Detokenize(const std::string& body, httplib::Response& res);
  json Props() const;
  void CreateContext(const std::string& body, httplib::Response& res);
  // Conversations (conversation_api.cpp): the routes; a chat turn planned
  // (its conversation found or created, held in arrival order, the new
  // messages' tokens; *status the HTTP status of an error), ended (the
  // answer appended and stored before it is sent) or failed midway (the
  // conversation read back from the store).
  void ConversationRoutes();
  struct TurnPlan {
    std::shared_ptr<ConversationTurn> turn;
    std::vector<ChatMessage> added;
    std::vector<int> tokens;
  };
  Expected<TurnPlan> PlanTurn(const CompletionRequest& r, int* status);
  Status FinishTurn(ConversationTurn& t, const Generation& g);
  void FailTurn(ConversationTurn& t);
  Expected<std::unique_ptr<Conversation>> NewConversation(const KvOverrides& kv);
  Expected<std::unique_ptr<Conversation>> LoadConversation(const std::string& bytes, const std::string& name);
  httplib::Server::HandlerWithContentReader WithBody(std::function<void(const std::string&, httplib::Response&)> handle);
  // The same with the request (its path's matches and query parameters).
  httplib::Server::HandlerWithContentReader WithRequestBody(
      std::function<void(const httplib::Request&, const std::string&, httplib::Response&)> handle);
  // llama-server's slots (slots_api.cpp): each slot's last completion's
  // session, kept after it ran; GET /slots; save / restore / erase.
  mutable std::mutex slots_mu;
  std::vector<std::shared_ptr<Session>> slot_sessions;
  void KeepSlotSession(int slot, std::shared_ptr<Session> s);
  std::shared_ptr<Session> SlotSession(int slot) const;  // null: none kept, or no such slot
  void SlotAction(int slot, const std::string& action, const std::string& body, httplib::Response& res);
  json Slots() const;
  Expected<std::shared_ptr<StoredContext>> LoadStored(const std::string& bytes, const std::string& name);
  int Ctx() const;  // context length of every session
  Metrics::Gauges Gauges() const;
};

// A JSON body (invalid UTF-8 from byte-level tokens replaced, never thrown).
std::string Dump(const json& j);
// An OpenAI-style error body {"error": {"message", "type", "code"}} with its status.
void SendError(httplib::Response& res, int status, const std::string& message);
// A stored context over a prefilled and compressed session (at least one
// token): its tokens, the bytes its entries occupy and hold, its peak.
std::shared_ptr<StoredContext> StoredFrom(std::unique_ptr<Session> s, const KvOptions& kv);
// The KV options as reported in responses.
json KvJson(const KvOptions& kv);
// Adds "clock_step_ms" and "below_clock_resolution" (the names of the
// `fields` of `x`, in ms, that span fewer than kMinClockSteps steps of
// the wall clock: on a machine whose clock ticks in 20 ms steps a 5 ms
// prefill reads 0 or 20) to a response object holding timings.
void MarkTimings(json& x, const std::vector<std::string>& fields);

struct Generation;
// What llama-server's answer to POST /completion reports besides the
// generation: the prompt's tokens (a cached prompt's included) and its text
// as llama-server prints it, the model's name, the request, the slot.
struct LlamaAnswerInfo {
  int prompt_n = 0;
  std::string prompt_text;
  std::string model;
  const CompletionRequest* request = nullptr;
  int slot = 0;
};
// llama-server's response to POST /completion (llama_api.cpp): index,
// content, tokens, id_slot, stop, model, tokens_predicted, tokens_evaluated,
// generation_settings (the fields this engine has), prompt, has_new_line,
// truncated, stop_type, stopping_word, tokens_cached, timings. One streamed
// event: {"content", "stop": false}; the last event is the whole object
// with "content" empty.
json LlamaCompletionJson(const Generation& g, const std::string& content, const LlamaAnswerInfo& info);
// Token ids as llama-server prints them: control tokens by their text
// (BOS "<s>"), every piece verbatim (a SentencePiece word's leading space kept).
std::string VerbatimText(const io::Tokenizer& tok, const std::vector<int>& ids);
json LlamaChunkJson(const std::string& content);

// Keeps Metrics' live-session KV bytes up to date for one request.
class LiveKv {
 public:
  explicit LiveKv(Metrics& m) : m_(m) {}
  ~LiveKv() { m_.AddLiveKv(-last_); }
  LiveKv(const LiveKv&) = delete;
  LiveKv& operator=(const LiveKv&) = delete;
  void Set(int64_t bytes) {
    m_.AddLiveKv(bytes - last_);
    last_ = bytes;
  }

 private:
  Metrics& m_;
  int64_t last_ = 0;
};

}  // namespace kvtrim::server
