// Request bodies of `kvtrim serve` (docs/server.md): parsed and validated by
// pure functions of the body text (no engine, no I/O), so a fuzz target can
// call them directly. Every error names the field and the problem.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <optional>
#include <string>
#include <vector>

#include "kvtrim/chat.h"
#include "kvtrim/options.h"
#include "kvtrim/status.h"

namespace kvtrim::server {

// The KV fields a request may set; what it leaves out comes from the
// server's defaults (kvtrim serve --kv ...), see ResolveKv.
// The KV fields of a request: the option table's request fields
// (docs/flags-kv.md: kv, kv_ratio, kv_budget, kv_quant, kv_head_budget,
// kv_min_head_share) and kv_params, the policy's own flags.
struct KvOverrides {
  KvOptions values;              // the fields given (the others: KvOptions' defaults, unused)
  std::set<std::string> given;   // the table names of the fields given ("kv-ratio")
  std::map<std::string, double> params;  // "kv_params": {"sinks": 4, "value-norm": "l2", ...}
  bool any() const { return !given.empty() || !params.empty(); }
};

// POST /v1/completions and /v1/chat/completions. Sampling defaults are
// kvtrim run's (temperature 0.8, top_p 0.9, seed 42), so the same request
// and `kvtrim run` flags give the same tokens.
struct CompletionRequest {
  bool chat = false;
  std::string prompt;                 // completions
  std::vector<ChatMessage> messages;  // chat completions
  int max_tokens = 16;                // tokens sampled at most (run's -n); -1: until EOS or the context is full
  bool llama = false;                 // POST /completion: llama-server's body and response
  SamplingOptions sampling;
  std::vector<std::string> stop;      // generation ends before the first of these
  bool stream = false;                // server-sent events
  bool return_tokens = false;         // also return the generated token ids
  std::string context_id;             // continue from this stored context
  // Chat only: append the new messages and the answer to this conversation
  // (created with the request's KV fields on first use).
  std::string conversation;
  // Store the compressed prompt; reuse a stored one this prompt begins with
  // (llama.cpp's field; server/prompt_cache.h).
  bool cache_prompt = false;
  int id_slot = -1;  // llama-server's: run on this slot (-1: the first free one)
  KvOverrides kv;
};

// POST /tokenize (llama-server's): the text, BOS or not, pieces or not.
struct TokenizeRequest {
  std::string content;
  bool add_special = false;  // BOS first
  bool with_pieces = false;  // [{id, piece}...] instead of [id...]
};

// POST /v1/contexts: the text is prefilled (after BOS) and compressed once.
struct ContextRequest {
  std::string text;
  KvOverrides kv;
};

// POST /v1/conversations: an optional id and the KV fields.
struct ConversationRequest {
  std::string id;  // empty: the server numbers it
  KvOverrides kv;
};

Expected<CompletionRequest> ParseCompletionRequest(const std::string& body);
Expected<CompletionRequest> ParseChatRequest(const std::string& body);
// POST /completion (llama-server's): `prompt`, `n_predict` (default -1: until
// EOS or the context is full), the sampling fields, `stop`, `stream`,
// `cache_prompt` and the KV fields, as /v1/completions reads them.
Expected<CompletionRequest> ParseLlamaCompletionRequest(const std::string& body);
Expected<ContextRequest> ParseContextRequest(const std::string& body);
Expected<ConversationRequest> ParseConversationRequest(const std::string& body);
// POST /slots/ID?action=save|restore (llama-server's): {"filename": NAME};
// the stored context's id is NAME with every '.' made '_' ("a.bin" ->
// "a_bin"), which must then be letters, digits, '-' and '_' (at most 64).
Expected<std::string> ParseSlotFilename(const std::string& body);
Expected<TokenizeRequest> ParseTokenizeRequest(const std::string& body);
// POST /detokenize (llama-server's): {"tokens": [id...]}, each id in [0, vocab).
Expected<std::vector<int>> ParseDetokenizeRequest(const std::string& body, int vocab);

// The request's KV options: its fields over `defaults`; naming a policy other
// than the default's drops the default's policy flags. The policy and its
// flags are checked against the registry.
Expected<KvOptions> ResolveKv(const KvOptions& defaults, const KvOverrides& o);

}  // namespace kvtrim::server
