// Chat formatting (include/kvtrim/chat.h): the family of a template is
// recognised by its distinctive strings (as llama.cpp's llm_chat_detect_template
// does), and each family is formatted as its published Jinja template renders
// it (docs/chat.md lists the templates and the variants read from the text).
#include "engine/engine_impl.h"
#include "kvtrim/chat.h"

#include <ctime>

#include "io/gguf.h"
#include "io/tokenizer.h"
#include "kvtrim/engine.h"

namespace kvtrim {
namespace {

bool Has(const std::string& s, const char* needle) { return s.find(needle) != std::string::npos; }

// Python's str.strip() / Jinja's trim for ASCII whitespace.
std::string Strip(const std::string& s) {
  const char* ws = " \t\n\r\f\v";
  const size_t a = s.find_first_not_of(ws);
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(ws) - a + 1);
}

// Splits off a leading system message.
struct Split {
  bool has_system = false;
  std::string system;
  std::vector<ChatMessage> rest;
};
Split SplitSystem(const std::vector<ChatMessage>& m) {
  Split s;
  size_t i = 0;
  if (!m.empty() && m[0].role == "system") {
    s.has_system = true;
    s.system = m[0].content;
    i = 1;
  }
  s.rest.assign(m.begin() + static_cast<std::ptrdiff_t>(i), m.end());
  return s;
}

// meta-llama/Llama-2-*-chat: BOS + "[INST] " before every user turn, the
// system message in <<SYS>> inside the first one, contents strip()ped,
// assistant turns " content </s>"; no generation prompt.
std::string FormatLlama2(const std::vector<ChatMessage>& messages, const std::string& bos, const std::string& eos) {
  const Split sp = SplitSystem(messages);
  std::string out;
  for (size_t i = 0; i < sp.rest.size(); ++i) {
    std::string content;
    if (i == 0 && sp.has_system) content.append("<<SYS>>\n").append(sp.system).append("\n<</SYS>>\n\n");
    content += sp.rest[i].content;
    if (sp.rest[i].role == "user") out.append(bos).append("[INST] ").append(Strip(content)).append(" [/INST]");
    else if (sp.rest[i].role == "assistant") out.append(" ").append(Strip(content)).append(" ").append(eos);
  }
  return out;
}

// Meta-Llama-3-*-Instruct: BOS, then a header + trimmed content + <|eot_id|>
// per message. The 3.1+ templates always open with a system turn carrying
// "Cutting Knowledge Date" and the date (strftime_now when the template asks
// for it, as transformers renders it, else the template's "26 Jul 2024").
std::string FormatLlama3(const std::string& tmpl, const std::vector<ChatMessage>& messages, const std::string& bos) {
  auto turn = [](const std::string& role, const std::string& content) {
    return "<|start_header_id|>" + role + "<|end_header_id|>\n\n" + Strip(content) + "<|eot_id|>";
  };
  std::string out = bos;
  std::vector<ChatMessage> rest = messages;
  if (Has(tmpl, "Cutting Knowledge Date")) {
    const Split sp = SplitSystem(messages);
    std::string date = "26 Jul 2024";
    if (Has(tmpl, "strftime_now")) {
      char buf[32];
      const std::time_t now = std::time(nullptr);
      std::tm tm{};
      localtime_r(&now, &tm);
      std::strftime(buf, sizeof buf, "%d %b %Y", &tm);
      date = buf;
    }
    out += "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: " + date +
           "\n\n" + Strip(sp.system) + "<|eot_id|>";
    rest = sp.rest;
  }
  for (const auto& m : rest) out += turn(m.role, m.content);
  return out + "<|start_header_id|>assistant<|end_header_id|>\n\n";
}

// The default system prompt a ChatML template writes when the conversation
// has none (Qwen2: "You are a helpful assistant.", Qwen2.5: "You are Qwen,
// ..."): a string literal '<|im_start|>system\n...<|im_end|>' in its text.
std::string ChatMLDefaultSystem(const std::string& tmpl) {
  const std::string open = "<|im_start|>system\\n", close = "<|im_end|>";
  for (size_t at = tmpl.find(open); at != std::string::npos; at = tmpl.find(open, at + 1)) {
    const size_t a = at + open.size(), b = tmpl.find(close, a);
    if (b == std::string::npos) break;
    const std::string lit = tmpl.substr(a, b - a);
    if (lit.empty() || lit.find_first_of("'\"{}\\") != std::string::npos) continue;
    return lit;
  }
  return "";
}

// ChatML (Qwen): <|im_start|>role\ncontent<|im_end|>\n per message, the
// template's default system turn when there is none, then the assistant's.
std::string FormatChatML(const std::string& tmpl, const std::vector<ChatMessage>& messages) {
  std::string out;
  const std::string dflt = ChatMLDefaultSystem(tmpl);
  if (!dflt.empty() && (messages.empty() || messages[0].role != "system"))
    out += "<|im_start|>system\n" + dflt + "<|im_end|>\n";
  for (const auto& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  return out + "<|im_start|>assistant\n";
}

// Mistral's [INST] templates differ in spacing and in where the system
// message goes; the variant is read from the template's literals:
//   v0.1/v0.2  "[INST] " + c + " [/INST]", assistant c + eos (system refused:
//              folded into the first user turn here, as v1 does),
//   v1         " [INST] " ... " [/INST]", assistant " " + c + eos, system first,
//   v3         "[INST] " ... "[/INST]", assistant " " + c|trim + eos, system last,
//   v3-tekken  "[INST]" ... "[/INST]", assistant c + eos, system last.
std::string FormatMistral(const std::string& tmpl, const std::vector<ChatMessage>& messages, const std::string& bos,
                          const std::string& eos) {
  std::string open = "[INST] ", close = "[/INST]";
  if (Has(tmpl, "' [INST] '") || Has(tmpl, "\" [INST] \"")) open = " [INST] ";
  else if (Has(tmpl, "'[INST]' +") || Has(tmpl, "\"[INST]\" +")) open = "[INST]";
  if (Has(tmpl, "' [/INST]'") || Has(tmpl, "\" [/INST]\"")) close = " [/INST]";
  const bool sys_last = Has(tmpl, "loop.last and system_message");
  const bool lead_space = Has(tmpl, "' ' + message['content']") || Has(tmpl, "\" \" + message[\"content\"]");
  const bool trim = Has(tmpl, "|trim + eos_token");
  const bool trail_space = Has(tmpl, "eos_token + ' '");
  const Split sp = SplitSystem(messages);
  int last_user = -1, first_user = -1;
  for (size_t i = 0; i < sp.rest.size(); ++i)
    if (sp.rest[i].role == "user") {
      last_user = static_cast<int>(i);
      if (first_user < 0) first_user = static_cast<int>(i);
    }
  const int sys_at = sys_last ? last_user : first_user;
  std::string out = bos;
  for (size_t i = 0; i < sp.rest.size(); ++i) {
    const ChatMessage& m = sp.rest[i];
    if (m.role == "user") {
      const bool with_sys = sp.has_system && static_cast<int>(i) == sys_at;
      out.append(open).append(with_sys ? sp.system + "\n\n" : std::string()).append(m.content).append(close);
    } else if (m.role == "assistant") {
      out.append(lead_space ? " " : "").append(trim ? Strip(m.content) : m.content).append(eos);
      out.append(trail_space ? " " : "");
    }
  }
  return out;
}

}  // namespace

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

ChatFamily DetectChatFamily(const std::string& t) {
  if (Has(t, "<|im_start|>")) return ChatFamily::kChatML;
  if (Has(t, "<|start_header_id|>") && Has(t, "<|end_header_id|>")) return ChatFamily::kLlama3;
  if (Has(t, "[INST]")) return Has(t, "<<SYS>>") ? ChatFamily::kLlama2 : ChatFamily::kMistral;
  return ChatFamily::kPlain;
}

ChatPrompt FormatChat(const std::string& chat_template, const std::vector<ChatMessage>& messages,
                      const std::string& bos, const std::string& eos) {
  ChatPrompt p;
  p.family = DetectChatFamily(chat_template);
  p.parse_special = p.family != ChatFamily::kPlain;
  p.has_bos = p.family == ChatFamily::kLlama2 || p.family == ChatFamily::kLlama3 || p.family == ChatFamily::kMistral;
  switch (p.family) {
    case ChatFamily::kLlama2: p.text = FormatLlama2(messages, bos, eos); break;
    case ChatFamily::kLlama3: p.text = FormatLlama3(chat_template, messages, bos); break;
    case ChatFamily::kChatML: p.text = FormatChatML(chat_template, messages); break;
    case ChatFamily::kMistral: p.text = FormatMistral(chat_template, messages, bos, eos); break;
    case ChatFamily::kPlain:
      for (const auto& m : messages) p.text += m.role + ": " + m.content + "\n";
      p.text += "assistant:";
      p.warning = chat_template.empty()
                      ? "the model has no chat template (tokenizer.chat_template); formatting as plain text"
                      : "chat template not recognised (not Llama 2/3, ChatML or Mistral); formatting as plain text";
      break;
  }
  return p;
}

std::string ChatTemplate(const Engine& engine) {
  std::string tmpl;
  if (engine.impl().file().Find("tokenizer.chat_template")) {
    if (auto t = engine.impl().file().GetString("tokenizer.chat_template")) tmpl = *t;
  }
  return tmpl;
}

ChatPrompt FormatChat(const Engine& engine, const std::vector<ChatMessage>& messages) {
  const auto& tok = engine.impl().tokenizer();
  return FormatChat(ChatTemplate(engine), messages, tok.piece_text(tok.bos()), tok.piece_text(tok.eos()));
}

std::vector<int> EndOfTurnIds(const Engine& engine, ChatFamily family) {
  std::vector<int> ids;
  const io::Tokenizer& tok = engine.impl().tokenizer();
  if (engine.impl().file().Find("tokenizer.ggml.eot_token_id")) {
    auto v = engine.impl().file().GetInt("tokenizer.ggml.eot_token_id");
    if (v.ok() && v.value() >= 0 && v.value() < tok.vocab_size()) ids.push_back(static_cast<int>(v.value()));
  }
  const char* text = family == ChatFamily::kLlama3 ? "<|eot_id|>" : family == ChatFamily::kChatML ? "<|im_end|>" : nullptr;
  if (text)
    for (int id = 0; id < tok.vocab_size(); ++id)
      if (tok.piece_text(id) == text) ids.push_back(id);
  return ids;
}

}  // namespace kvtrim
