// Chat formatting (include/kvtrim/chat.h). Placeholder: every template is
// formatted as plain text until the family rules land (issue 13).
#include "kvtrim/chat.h"

#include "io/gguf.h"
#include "io/tokenizer.h"
#include "kvtrim/engine.h"

namespace kvtrim {

const char* ChatFamilyName(ChatFamily f) {
  switch (f) {
    case ChatFamily::kLlama2: return "llama2";
    case ChatFamily::kLlama3: return "llama3";
    case ChatFamily::kChatML: return "chatml";
    case ChatFamily::kMistral: return "mistral";
    case ChatFamily::kPlain: break;
  }
  return "plain";
}

ChatFamily DetectChatFamily(const std::string&) { return ChatFamily::kPlain; }

ChatPrompt FormatChat(const std::string& chat_template, const std::vector<ChatMessage>& messages,
                      const std::string&, const std::string&) {
  ChatPrompt p;
  for (const auto& m : messages) p.text += m.role + ": " + m.content + "\n";
  p.text += "assistant:";
  if (!chat_template.empty()) p.warning = "chat template not recognised; formatting as plain text";
  return p;
}

ChatPrompt FormatChat(const Engine& engine, const std::vector<ChatMessage>& messages) {
  const auto& tok = engine.tokenizer();
  std::string tmpl;
  if (engine.file().Find("tokenizer.chat_template")) {
    if (auto t = engine.file().GetString("tokenizer.chat_template")) tmpl = *t;
  }
  return FormatChat(tmpl, messages, tok.piece_text(tok.bos()), tok.piece_text(tok.eos()));
}

}  // namespace kvtrim
