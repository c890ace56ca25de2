// One completion on a session: prefill, (compress), then sampling with
// exactly the rules of Generate (kvtrim run), plus stop strings and text
// released piece by piece for streaming.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "kvtrim/engine.h"
#include "server/request.h"

namespace kvtrim::io { class Tokenizer; }

namespace kvtrim::server {

// Accumulates generated text; cuts it before the first stop string and
// releases only text that can no longer change: never a prefix of a stop
// string that may still complete, never half a UTF-8 character.
class StopText {
 public:
  explicit StopText(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  // Appends a piece; true once a stop string appeared (the text ends before it).
  bool Add(const std::string& piece);
  // The text not yet released that is final now (all of it with `final`).
  std::string TakeReady(bool final);
  const std::string& text() const { return text_; }
  const std::string& word() const { return word_; }  // the stop string that ended it ("" if none)

 private:
  std::vector<std::string> stops_;
  std::string text_;
  size_t sent_ = 0;
  bool stopped_ = false;
  std::string word_;
};

struct Generation {
  std::string text;
  std::vector<int> tokens;               // generated ids
  std::string finish_reason = "length";  // "stop": EOS/BOS or a stop string
  bool stopped_by_word = false;          // ... a stop string
  std::string stop_word;                 // which one
  int tokens_held = 0;                   // the session's tokens at the end (llama-server's tokens_cached)
  int prompt_tokens = 0, completion_tokens = 0;
  size_t kv_bytes = 0, kv_bytes_full = 0, kv_entries = 0;  // the session's cache at the end
  size_t kv_bytes_peak = 0;  // the most its session held at once (Session::peak_kv_bytes)
  double prefill_ms = 0, decode_ms = 0;
};

struct GenerationHooks {
  // Text as it becomes final; returning false stops generating (client gone).
  std::function<bool(const std::string&)> on_text;
  // After prefill and after each decode step (live KV bytes).
  std::function<void(const Session&)> on_step;
  // Once, after prefill (and compression), before the first token is
  // sampled: the server stores the compressed prompt here (cache_prompt).
  // Its time counts in neither prefill_ms nor decode_ms.
  std::function<void(const Session&)> on_prefilled;
  // Before each token: false stops generating (the client went away).
  std::function<bool()> alive;
  // Replaces the prefill and compression (a conversation's turn: Conversation::BeginTurn).
  std::function<Status()> prefill;
};

// Prefills `prompt` into `s`, compresses when `compress` (a fresh session,
// as Generate does; a fork of a stored context is already compressed), then
// samples r.max_tokens tokens at most. `prev` is the token before the first
// generated one's predecessor chain (the last prompt token), for Piece.
Expected<Generation> RunGeneration(Session& s, const io::Tokenizer& tok, const std::vector<int>& prompt, bool compress,
                                   int prev, const CompletionRequest& r, const GenerationHooks& hooks);
// Its two halves: the prefill (and compression, then on_prefilled), whose
// errors a non-streamed request answers with their status, and the
// sampling, which a non-streamed request runs while its response is sent
// (so that it can tell when the client went away).
Status PrefillPrompt(Session& s, const std::vector<int>& prompt, bool compress, const GenerationHooks& hooks,
                     Generation* g);
Status SampleAnswer(Session& s, const io::Tokenizer& tok, int prev, const CompletionRequest& r,
                    const GenerationHooks& hooks, Generation* g);

}  // namespace kvtrim::server
