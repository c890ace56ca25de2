// Chat formatting (include/kvtrim/chat.h): each family's text for a (system,
// user, assistant, user) conversation equals what the published Jinja
// template renders (add_generation_prompt = true), written out by hand from
// the template text in tests/chat_templates.h.
#include <gtest/gtest.h>

#include <ctime>

#include "chat_templates.h"
#include "kvtrim/chat.h"

namespace kvtrim {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

const std::vector<ChatMessage> kConv = {{"system", "You are a helpful assistant."},
                                        {"user", "Hello"},
                                        {"assistant", " Hi there "},
                                        {"user", "Who are you?"}};
const std::vector<ChatMessage> kNoSystem(kConv.begin() + 1, kConv.end());

TEST(Chat, DetectsFamiliesFromTheTemplateText) {
  EXPECT_EQ(DetectChatFamily(test::kLlama2Chat), ChatFamily::kLlama2);
  EXPECT_EQ(DetectChatFamily(test::kLlama3Instruct), ChatFamily::kLlama3);
  EXPECT_EQ(DetectChatFamily(test::kLlama31Instruct), ChatFamily::kLlama3);
  EXPECT_EQ(DetectChatFamily(test::kChatML), ChatFamily::kChatML);
  EXPECT_EQ(DetectChatFamily(test::kQwen25Instruct), ChatFamily::kChatML);
  for (const char* t : {test::kMistral02Instruct, test::kMistralV1, test::kMistralV3, test::kMistralNemo})
    EXPECT_EQ(DetectChatFamily(t), ChatFamily::kMistral);
  EXPECT_EQ(DetectChatFamily(""), ChatFamily::kPlain);
  EXPECT_EQ(DetectChatFamily("{% for m in messages %}{{ m.content }}{% endfor %}"), ChatFamily::kPlain);
  EXPECT_STREQ(ChatFamilyName(ChatFamily::kChatML), "chatml");
}

TEST(Chat, Llama2SystemInsideFirstInstAndBosPerUserTurn) {
  ChatPrompt p = FormatChat(test::kLlama2Chat, kConv, "<s>", "</s>");
  EXPECT_EQ(p.text,
            "<s>[INST] <<SYS>>\nYou are a helpful assistant.\n<</SYS>>\n\nHello [/INST] Hi there </s>"
            "<s>[INST] Who are you? [/INST]");
  EXPECT_TRUE(p.has_bos);
  EXPECT_TRUE(p.parse_special);
  EXPECT_TRUE(p.warning.empty());
  EXPECT_EQ(FormatChat(test::kLlama2Chat, kNoSystem, "<s>", "</s>").text,
            "<s>[INST] Hello [/INST] Hi there </s><s>[INST] Who are you? [/INST]");
}

TEST(Chat, Llama3HeadersTrimmedContentAndGenerationPrompt) {
  const std::string b = "<|begin_of_text|>", e = "<|eot_id|>";
  ChatPrompt p = FormatChat(test::kLlama3Instruct, kConv, b, e);
  EXPECT_EQ(p.text,
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nWho are you?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_TRUE(p.has_bos);
  EXPECT_EQ(FormatChat(test::kLlama3Instruct, kNoSystem, b, e).text,
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nWho are you?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(Chat, Llama31AlwaysOpensWithTheDatedSystemTurn) {
  const std::string b = "<|begin_of_text|>", e = "<|eot_id|>";
  const std::string sys = "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
                          "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n";
  const std::string turns = "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
                            "<|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|>"
                            "<|start_header_id|>user<|end_header_id|>\n\nWho are you?<|eot_id|>"
                            "<|start_header_id|>assistant<|end_header_id|>\n\n";
  EXPECT_EQ(FormatChat(test::kLlama31Instruct, kConv, b, e).text, sys + "You are a helpful assistant.<|eot_id|>" + turns);
  EXPECT_EQ(FormatChat(test::kLlama31Instruct, kNoSystem, b, e).text, sys + "<|eot_id|>" + turns);
  // Llama 3.2's template takes the date from strftime_now("%d %b %Y") when defined (transformers does).
  const std::string t32 = std::string(test::kLlama31Instruct) + "{# strftime_now #}";
  char buf[32];
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  std::strftime(buf, sizeof buf, "%d %b %Y", &tm);
  EXPECT_NE(FormatChat(t32, kNoSystem, b, e).text.find(std::string("Today Date: ") + buf + "\n\n<|eot_id|>"),
            std::string::npos);
}

TEST(Chat, ChatMLAndQwenDefaultSystemPrompt) {
  const std::string turns = "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n Hi there <|im_end|>\n"
                            "<|im_start|>user\nWho are you?<|im_end|>\n<|im_start|>assistant\n";
  for (const char* t : {test::kChatML, test::kQwen2Instruct, test::kQwen25Instruct, test::kSmolLM2Instruct}) {
    ChatPrompt p = FormatChat(t, kConv, "<s>", "<|im_end|>");
    EXPECT_EQ(p.text, "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n" + turns);
    EXPECT_FALSE(p.has_bos);
    EXPECT_TRUE(p.parse_special);
  }
  EXPECT_EQ(FormatChat(test::kChatML, kNoSystem, "", "").text, turns);
  EXPECT_EQ(FormatChat(test::kQwen2Instruct, kNoSystem, "", "").text,
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n" + turns);
  EXPECT_EQ(FormatChat(test::kSmolLM2Instruct, kNoSystem, "", "").text,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n" + turns);
  EXPECT_EQ(FormatChat(test::kQwen25Instruct, kNoSystem, "", "").text,
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n" + turns);
}

TEST(Chat, MistralVariantsSpacingAndSystemPlacement) {
  // v0.3 (and Large-2407): system prepended to the LAST user turn; " " + trimmed answer.
  EXPECT_EQ(FormatChat(test::kMistralV3, kConv, "<s>", "</s>").text,
            "<s>[INST] Hello[/INST] Hi there</s>[INST] You are a helpful assistant.\n\nWho are you?[/INST]");
  // v1: " [INST] ", system in the first user turn, answer as is after a space.
  EXPECT_EQ(FormatChat(test::kMistralV1, kConv, "<s>", "</s>").text,
            "<s> [INST] You are a helpful assistant.\n\nHello [/INST]  Hi there </s> [INST] Who are you? [/INST]");
  // Nemo (v3-tekken): no spaces inside [INST].
  EXPECT_EQ(FormatChat(test::kMistralNemo, kConv, "<s>", "</s>").text,
            "<s>[INST]Hello[/INST] Hi there </s>[INST]You are a helpful assistant.\n\nWho are you?[/INST]");
  // v0.2 refuses a system message (raise_exception); without one:
  ChatPrompt p = FormatChat(test::kMistral02Instruct, kNoSystem, "<s>", "</s>");
  EXPECT_EQ(p.text, "<s>[INST] Hello [/INST] Hi there </s>[INST] Who are you? [/INST]");
  EXPECT_TRUE(p.has_bos);
  // ... and with one, kvtrim folds it into the first user turn as v1 does.
  EXPECT_EQ(FormatChat(test::kMistral02Instruct, kConv, "<s>", "</s>").text,
            "<s>[INST] You are a helpful assistant.\n\nHello [/INST] Hi there </s>[INST] Who are you? [/INST]");
}

TEST(Chat, UnknownOrMissingTemplateIsPlainTextWithAWarning) {
  ChatPrompt p = FormatChat("{{ messages }}", kConv, "<s>", "</s>");
  EXPECT_EQ(p.family, ChatFamily::kPlain);
  EXPECT_EQ(p.text, "system: You are a helpful assistant.\nuser: Hello\nassistant:  Hi there \nuser: Who are you?\nassistant:");
  EXPECT_NE(p.warning.find("not recognised"), std::string::npos);
  EXPECT_FALSE(p.parse_special);
  EXPECT_FALSE(p.has_bos);
  EXPECT_NE(FormatChat("", kConv, "<s>", "</s>").warning.find("tokenizer.chat_template"), std::string::npos);
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim
