// A prompt's text to token ids (include/kvtrim/prompt.h).
#include "engine/engine_impl.h"
#include "kvtrim/prompt.h"

#include "io/tokenizer.h"
#include "kvtrim/chat.h"
#include "kvtrim/engine.h"

namespace kvtrim {

PromptTokens EncodePrompt(const Engine& engine, const PromptRequest& r) {
  const io::Tokenizer& tok = engine.impl().tokenizer();
  PromptTokens out;
  // After a loaded context the prompt is mid-text: a previous id that is
  // not BOS keeps its first token's leading space (Tokenizer::Piece).
  out.prev = r.continues ? (tok.bos() == 0 ? 1 : 0) : -1;
  if (!r.chat) {
    out.ids = tok.Encode(r.text, !r.continues);
    return out;
  }
  std::vector<ChatMessage> msgs;
  if (!r.system.empty()) msgs.push_back({"system", r.system});
  msgs.push_back({"user", r.text});
  const ChatPrompt p = FormatChat(engine, msgs);
  out.warning = p.warning;
  out.stop_ids = EndOfTurnIds(engine, p.family);
  out.ids = tok.Encode(p.text, /*add_bos=*/!p.has_bos && tok.add_bos(), /*parse_special=*/p.parse_special);
  return out;
}

std::string TokenText(const Engine& engine, int prev, int id) { return engine.impl().tokenizer().Piece(prev, id); }

std::string DecodeTokens(const Engine& engine, const std::vector<int>& ids) { return engine.impl().tokenizer().Decode(ids); }

}  // namespace kvtrim
