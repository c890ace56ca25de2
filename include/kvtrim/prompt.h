// A prompt's text to the model's token ids, as `kvtrim run` and embedders
// give it: plain text, or (chat) a user message formatted with the model's
// chat template; and token ids back to text for printing as they come.
#pragma once
#include <string>
#include <vector>

namespace kvtrim {

class Engine;

struct PromptRequest {
  std::string text;
  bool chat = false;       // format `text` as the user message (FormatChat)
  std::string system;      // with chat: a system message
  // The prompt continues a loaded context (a question after it): no BOS is
  // added and its first token keeps its leading space when printed.
  bool continues = false;
};

struct PromptTokens {
  std::vector<int> ids;
  std::vector<int> stop_ids;  // with chat: the tokens that end the assistant's turn (EndOfTurnIds)
  std::string warning;        // the chat template was not recognised (plain text used)
  int prev = -1;              // the id to print ids[0] after (TokenText): -1 at the start
};
PromptTokens EncodePrompt(const Engine& engine, const PromptRequest& request);

// The text of token `id` after token `prev` (-1: the start of the text; a
// SentencePiece piece's leading space is dropped only after BOS or at the start).
std::string TokenText(const Engine& engine, int prev, int id);

// The text of a run of token ids (no BOS/EOS text).
std::string DecodeTokens(const Engine& engine, const std::vector<int>& ids);

}  // namespace kvtrim
