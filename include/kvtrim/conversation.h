// A conversation that goes on in one session whose KV cache a policy holds
// to its budget: each turn's new messages are formatted with the model's
// chat template as the continuation of what the session already holds (the
// answers it generated included), prefilled (in chunks with
// KvOptions::prefill_chunk) and compressed; the caller samples the answer
// on session() and ends the turn with it. Memory stays within the budget
// plus one turn's tokens whatever the number of turns. The server's
// conversations and `kvtrim chat` both run on it.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "kvtrim/chat.h"
#include "kvtrim/engine.h"
#include "kvtrim/status.h"

namespace kvtrim {

class Conversation {
 public:
  // A new, empty conversation (its session is created with `opts`). A policy
  // that runs a reference pass over the whole context (am, kvzip) is refused:
  // a conversation compresses after every turn, and the pass would repeat
  // the whole conversation each time.
  static Expected<std::unique_ptr<Conversation>> Create(const Engine& engine, const SessionOptions& opts);
  // One saved with Bytes() (a context file whose note holds the messages);
  // opts.kv is ignored (the file's own); errors begin with `name`.
  static Expected<std::unique_ptr<Conversation>> Load(const Engine& engine, const std::string& bytes,
                                                      const std::string& name, const SessionOptions& opts);

  // The messages a request brings that are new: all of `messages`, or when
  // they begin with this conversation's messages (a client that sends the
  // whole history, as OpenAI's API has it), the rest.
  std::vector<ChatMessage> NewMessages(const std::vector<ChatMessage>& messages) const;
  // The tokens that continue the session with `added` (ending with the
  // assistant's turn opened): the first turn's whole formatted prompt (BOS
  // where the template puts it), then the text the template writes after
  // the last answer, preceded by the answer's last token when it was
  // sampled but not fed (a length-limited answer). An error when `added`
  // is empty or the template cannot be continued.
  Expected<std::vector<int>> TurnTokens(const std::vector<ChatMessage>& added) const;
  // Prefills `tokens` (TurnTokens(added)) and compresses; the answer is
  // then sampled on session(), fed back as Generate does (every sampled
  // token but the last). First, when the turn and `answer_room` tokens of
  // answer would pass the context length, the session is re-based
  // (Session::MakeRoom), so a conversation goes on past it.
  Status BeginTurn(const std::vector<ChatMessage>& added, const std::vector<int>& tokens, size_t answer_room = 0);
  // A scripted answer instead of a sampled one (an evaluation's dialogue):
  // its tokens are fed, then the turn ends with it.
  Status ForceAnswer(const std::string& answer);
  // The turn's answer: its text (the assistant's message) and the tokens
  // sampled; those the session has not been fed wait for the next turn.
  void EndTurn(const std::string& answer, const std::vector<int>& sampled);

  // The conversation as a context file's bytes (docs/context-file.md): the
  // session's cache and tokens, the messages and the pending tokens in its note.
  std::string Bytes() const;
  // The same written to `path` atomically (Session::SaveContext).
  Status Save(const std::string& path) const;
  // One saved with Save (errors name the file).
  static Expected<std::unique_ptr<Conversation>> LoadFile(const Engine& engine, const std::string& path,
                                                          const SessionOptions& opts);

  Session& session() { return *session_; }
  const Session& session() const { return *session_; }
  const std::vector<ChatMessage>& messages() const { return messages_; }
  int turns() const { return turns_; }
  // Tokens sampled and not yet fed (the last of a length-limited answer).
  const std::vector<int>& pending() const { return pending_; }
  // The most KV bytes held at once over every turn so far; the last turn's
  // alone is session().peak_kv_bytes().
  size_t peak_kv_bytes() const { return peak_; }
  // The answer's first token follows this one (for detokenizing pieces).
  int last_token() const;

 private:
  Conversation() = default;
  void NoteOnSession() const;  // the messages and pending tokens into the session's context note
  // A loaded session whose context note holds a conversation (Load, LoadFile).
  static Expected<std::unique_ptr<Conversation>> FromSession(const Engine& engine, std::unique_ptr<Session> s,
                                                             const std::string& name);
  const Engine* engine_ = nullptr;
  std::unique_ptr<Session> session_;
  std::vector<ChatMessage> messages_;
  std::vector<int> pending_;
  int turns_ = 0;
  size_t peak_ = 0;
  size_t fed_before_answer_ = 0;  // session tokens when the answer's sampling began
};

// The text a chat template writes between the end of the assistant's
// answer (the last of `history`) and the opening of the next assistant's
// turn after `added`: FormatChat(history, with the answer's content
// replaced by a marker, then added) after the marker. An error when the
// template drops the answer (no marker in its text).
Expected<std::string> ContinuationText(const std::string& chat_template, const std::vector<ChatMessage>& history,
                                       const std::vector<ChatMessage>& added, const std::string& bos,
                                       const std::string& eos);

}  // namespace kvtrim
