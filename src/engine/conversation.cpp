// Conversation (include/kvtrim/conversation.h): turns appended to one
// session, their text the chat template's continuation of what it holds.
#include "kvtrim/conversation.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "engine/engine_impl.h"
#include "io/tokenizer.h"
#include "kv/compressor.h"

namespace kvtrim {

namespace {

using nlohmann::json;

// Stands for the answer's content in a rendering of the template: control
// characters no template writes and no message is expected to hold.
constexpr const char* kAnswerMark = "\x1d\x1ekvtrim-answer\x1e\x1d";

Status CheckPolicy(const Session& s) {
  const kv::Compressor& c = s.impl().compressor();
  const kv::ReferencePass& rp = c.policy().traits().reference_pass;
  if (rp.repeat && !rp.turn_local)
    return MakeError("policy '" + c.options().policy +
                     "' runs a reference pass over the whole context whenever it compresses, and a conversation "
                     "compresses after every turn: the pass would repeat the whole conversation each turn (use "
                     "am or kvzip, whose passes repeat each turn only, or a policy without one: snapkv, h2o, "
                     "tova, ...)");
  // A lagging policy compacts each turn once, to its share of the budget,
  // and never revisits it: only a ratio gives every turn a share that stays
  // its share as the conversation grows (a token budget's would shrink).
  if (rp.turn_lag && c.options().budget_tokens > 0)
    return MakeError("policy '" + c.options().policy +
                     "' compacts each turn once to its share of the budget and never revisits it: in a "
                     "conversation give it a ratio (--kv-ratio, or kv_ratio in a request), not a token budget");
  return {};
}

bool LagsATurn(const Session& s) { return s.impl().compressor().policy().traits().reference_pass.turn_lag; }

json NoteJson(const std::vector<ChatMessage>& messages, const std::vector<int>& pending, int turns, size_t fed,
              size_t peak, const Session& s) {
  json m = json::array();
  for (const auto& x : messages) m.push_back({{"role", x.role}, {"content", x.content}});
  json j{{"kind", "kvtrim conversation"}, {"messages", m}, {"pending", pending}, {"turns", turns},
         {"fed_before_answer", fed}, {"kv_bytes_peak", peak}};
  // A lagging policy's held turn: where it begins (its entries are not yet
  // compacted; the next turn compacts from there, as it would have in memory).
  if (LagsATurn(s)) j["compressed_to"] = s.compressed_to();
  return j;
}

}  // namespace

Expected<std::string> ContinuationText(const std::string& chat_template, const std::vector<ChatMessage>& history,
                                       const std::vector<ChatMessage>& added, const std::string& bos,
                                       const std::string& eos) {
  if (history.empty() || history.back().role != "assistant")
    return MakeError("a continuation follows an assistant's answer");
  std::vector<ChatMessage> all = history;
  all.back().content = kAnswerMark;
  all.insert(all.end(), added.begin(), added.end());
  const std::string text = FormatChat(chat_template, all, bos, eos).text;
  const size_t at = text.find(kAnswerMark);
  if (at == std::string::npos)
    return MakeError("the chat template does not write the assistant's answers: a conversation cannot continue");
  return text.substr(at + std::string(kAnswerMark).size());
}

Expected<std::unique_ptr<Conversation>> Conversation::Create(const Engine& engine, const SessionOptions& opts) {
  auto s = Session::Create(engine, opts);
  if (!s.ok()) return s.error();
  KVTRIM_RETURN_IF_ERROR(CheckPolicy(*s.value()));
  std::unique_ptr<Conversation> c(new Conversation());
  c->engine_ = &engine;
  c->session_ = std::move(s.value());
  c->session_->set_hold_newest_turn(true);
  return c;
}

Expected<std::unique_ptr<Conversation>> Conversation::Load(const Engine& engine, const std::string& bytes,
                                                           const std::string& name, const SessionOptions& opts) {
  auto s = Session::LoadContextBytes(engine, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), name, opts);
  if (!s.ok()) return s.error();
  return FromSession(engine, std::move(s.value()), name);
}

Expected<std::unique_ptr<Conversation>> Conversation::LoadFile(const Engine& engine, const std::string& path,
                                                               const SessionOptions& opts) {
  auto s = Session::LoadContext(engine, path, opts);
  if (!s.ok()) return s.error();
  return FromSession(engine, std::move(s.value()), "conversation file '" + path + "'");
}

Expected<std::unique_ptr<Conversation>> Conversation::FromSession(const Engine& engine, std::unique_ptr<Session> s,
                                                                  const std::string& name) {
  json note = json::parse(s->context_note(), nullptr, false);
  auto fail = [&](const std::string& why) { return MakeError(name + ": " + why); };
  if (!note.is_object() || note.value("kind", "") != "kvtrim conversation")
    return fail("not a conversation (its note is not one)");
  std::unique_ptr<Conversation> c(new Conversation());
  c->engine_ = &engine;
  size_t compressed_to = 0;
  try {
    for (const auto& m : note.at("messages"))
      c->messages_.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
    c->pending_ = note.at("pending").get<std::vector<int>>();
    c->turns_ = note.at("turns").get<int>();
    c->fed_before_answer_ = note.at("fed_before_answer").get<size_t>();
    c->peak_ = note.value("kv_bytes_peak", size_t{0});
    compressed_to = note.value("compressed_to", size_t{0});
  } catch (const json::exception& e) {
    return fail(std::string("its conversation note is malformed: ") + e.what());
  }
  const int vocab = engine.impl().tokenizer().vocab_size();
  for (int t : c->pending_)
    if (t < 0 || t >= vocab) return fail("a pending token id is outside the vocabulary");
  if (c->turns_ < 0 || c->fed_before_answer_ > s->tokens().size() || compressed_to > s->tokens().size())
    return fail("its conversation note does not match its tokens");
  c->session_ = std::move(s);
  c->session_->set_hold_newest_turn(true);
  if (LagsATurn(*c->session_)) c->session_->set_compressed_to(compressed_to);
  KVTRIM_RETURN_IF_ERROR(CheckPolicy(*c->session_));
  return c;
}

std::vector<ChatMessage> Conversation::NewMessages(const std::vector<ChatMessage>& m) const {
  const size_t n = messages_.size();
  bool prefix = n > 0 && m.size() > n;
  for (size_t i = 0; prefix && i < n; ++i)
    prefix = m[i].role == messages_[i].role && m[i].content == messages_[i].content;
  if (!prefix) return m;
  return std::vector<ChatMessage>(m.begin() + static_cast<std::ptrdiff_t>(n), m.end());
}

Expected<std::vector<int>> Conversation::TurnTokens(const std::vector<ChatMessage>& added) const {
  if (added.empty()) return MakeError("a turn needs at least one new message");
  const io::Tokenizer& tok = engine_->impl().tokenizer();
  if (messages_.empty()) {
    const ChatPrompt p = FormatChat(*engine_, added);
    return tok.Encode(p.text, !p.has_bos, p.parse_special);
  }
  const std::string tmpl = ChatTemplate(*engine_);
  auto text = ContinuationText(tmpl, messages_, added, tok.piece_text(tok.bos()), tok.piece_text(tok.eos()));
  if (!text.ok()) return text.error();
  std::vector<int> out = pending_;
  const std::vector<int> rest = tok.Encode(text.value(), false, DetectChatFamily(tmpl) != ChatFamily::kPlain);
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

Status Conversation::BeginTurn(const std::vector<ChatMessage>& added, const std::vector<int>& tokens,
                               size_t answer_room) {
  if (tokens.empty()) return MakeError("a turn needs at least one token");
  KVTRIM_RETURN_IF_ERROR(session_->MakeRoom(tokens.size() + answer_room));
  session_->ResetPeak();
  KVTRIM_RETURN_IF_ERROR(session_->Prefill(tokens));
  KVTRIM_RETURN_IF_ERROR(session_->Compress());
  messages_.insert(messages_.end(), added.begin(), added.end());
  pending_.clear();
  fed_before_answer_ = session_->tokens().size();
  return {};
}

Status Conversation::ForceAnswer(const std::string& answer) {
  const std::vector<int> ids = engine_->impl().tokenizer().Encode(answer, false);
  if (!ids.empty()) KVTRIM_RETURN_IF_ERROR(session_->Prefill(ids));
  EndTurn(answer, ids);
  return {};
}

void Conversation::EndTurn(const std::string& answer, const std::vector<int>& sampled) {
  messages_.push_back({"assistant", answer});
  ++turns_;
  peak_ = std::max(peak_, session_->peak_kv_bytes());
  // The session was fed the sampled tokens but (usually) the last.
  const size_t fed = session_->tokens().size() - fed_before_answer_;
  pending_.clear();
  if (fed < sampled.size()) pending_.assign(sampled.begin() + static_cast<std::ptrdiff_t>(fed), sampled.end());
  fed_before_answer_ = session_->tokens().size();
}

void Conversation::NoteOnSession() const {
  session_->set_context_note(NoteJson(messages_, pending_, turns_, fed_before_answer_, peak_, *session_).dump());
}

std::string Conversation::Bytes() const {
  NoteOnSession();
  return session_->ContextBytes();
}

Status Conversation::Save(const std::string& path) const {
  NoteOnSession();
  return session_->SaveContext(path);
}

int Conversation::last_token() const {
  if (!pending_.empty()) return pending_.back();
  return session_->tokens().empty() ? -1 : session_->tokens().back();
}

}  // namespace kvtrim
