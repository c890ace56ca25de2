// Chat formatting: a list of messages to the prompt text the model was
// trained on, from the model's own template (GGUF tokenizer.chat_template).
#pragma once
#include <string>
#include <vector>

namespace kvtrim {

class Engine;

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

// The template families kvtrim recognises (it does not run Jinja: it detects
// the family from the template text and formats with that family's rules).
enum class ChatFamily { kPlain, kLlama2, kLlama3, kChatML, kMistral };

const char* ChatFamilyName(ChatFamily f);

// The family of a chat template's text; kPlain for an empty or unknown one.
ChatFamily DetectChatFamily(const std::string& chat_template);

struct ChatPrompt {
  std::string text;      // the formatted conversation, ending with the assistant's turn opened
  ChatFamily family = ChatFamily::kPlain;
  std::string warning;   // non-empty when the template was not recognised (plain text used)
  // The text holds special tokens (<|im_start|>, [INST], ...) to be matched
  // as such when tokenized; BOS is written into the text where the template
  // puts it, so the caller must not add another.
  bool parse_special = false;
  bool has_bos = false;
};

// Formats `messages` with `chat_template` (the family is detected from it);
// bos/eos are the model's BOS/EOS token texts.
ChatPrompt FormatChat(const std::string& chat_template, const std::vector<ChatMessage>& messages,
                      const std::string& bos, const std::string& eos);

// The model's tokenizer.chat_template ("" when it has none).
std::string ChatTemplate(const Engine& engine);

// Formats with the engine's model: its tokenizer.chat_template and BOS/EOS texts.
ChatPrompt FormatChat(const Engine& engine, const std::vector<ChatMessage>& messages);

// The tokens that end an assistant's turn besides EOS: the file's
// tokenizer.ggml.eot_token_id, and the family's end-of-turn token text
// (<|eot_id|> for Llama 3, <|im_end|> for ChatML).
std::vector<int> EndOfTurnIds(const Engine& engine, ChatFamily family);

}  // namespace kvtrim
