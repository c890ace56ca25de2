// llama-server's own endpoints on a real server over loopback, with a real
// HTTP client: /tokenize and /detokenize against the tokenizer, /completion
// (plain and streamed) against /v1/completions on the same request, n_predict
// in the OpenAI routes, /props, and bad inputs answered 400.
#include "server_fixture.h"

namespace kvtrim::server {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

class LlamaApiTest : public ServerTest {};

// llama-server's stream: {"content", "stop"} events, the last one whole; no [DONE].
std::string LlamaStreamText(const std::string& body, json* last) {
  std::string text;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    const size_t end = body.find("\n\n", pos);
    const std::string data = body.substr(pos + 6, end - pos - 6);
    pos = end;
    EXPECT_NE(data, "[DONE]");
    json ev = json::parse(data);
    text += ev["content"].get<std::string>();
    *last = ev;
  }
  return text;
}

TEST_F(LlamaApiTest, TokenizeAndDetokenize) {
  TestServer ts(engine(), {});
  auto c = ts.Client();
  const io::Tokenizer& tok = engine().impl().tokenizer();
  const std::string text = Passage(1200, 300);
  json r = Post(c, "/tokenize", {{"content", text}});
  EXPECT_EQ(r["tokens"].get<std::vector<int>>(), tok.Encode(text, false));
  r = Post(c, "/tokenize", {{"content", text}, {"add_special", true}});
  const std::vector<int> with_bos = tok.Encode(text, true);
  EXPECT_EQ(r["tokens"].get<std::vector<int>>(), with_bos);
  ASSERT_FALSE(with_bos.empty());
  EXPECT_EQ(with_bos.front(), tok.bos());
  r = Post(c, "/tokenize", {{"content", text}, {"with_pieces", true}});
  std::string pieces;
  for (const json& t : r["tokens"]) pieces += t["piece"].get<std::string>();
  EXPECT_EQ(pieces, text);  // this tokenizer's pieces spell the text back
  const std::vector<int> ids = tok.Encode(text, false);
  r = Post(c, "/detokenize", {{"tokens", ids}});
  // As llama-server: every piece verbatim, a SentencePiece word's leading space kept.
  EXPECT_EQ(r["content"].get<std::string>(), (tok.add_space_prefix() ? " " : "") + text);
  // Bad inputs: 400 naming the field, and the server goes on.
  Post(c, "/tokenize", {{"text", text}}, 400);
  Post(c, "/tokenize", {{"content", text}, {"add_special", "yes"}}, 400);
  json bad = Post(c, "/detokenize", {{"tokens", {1, 2, engine().impl().tokenizer().vocab_size()}}}, 400);
  EXPECT_NE(bad["error"]["message"].get<std::string>().find("tokens[2]"), std::string::npos);
  Post(c, "/detokenize", {{"tokens", "1 2 3"}}, 400);
  EXPECT_EQ(Post(c, "/tokenize", {{"content", "a"}})["tokens"].size(), tok.Encode("a", false).size());
}

TEST_F(LlamaApiTest, CompletionEqualsTheOpenAiRoute) {
  TestServer ts(engine(), {});
  auto c = ts.Client();
  const io::Tokenizer& tok = engine().impl().tokenizer();
  const std::string prompt = Passage(5000, 400);
  const json common{{"prompt", prompt}, {"temperature", 0.7}, {"seed", 5}, {"top_k", 20}, {"kv", "snapkv"},
                    {"kv_ratio", 0.5}};
  json oa = common;
  oa["max_tokens"] = 10;
  json ref = Post(c, "/v1/completions", oa);
  json ll = common;
  ll["n_predict"] = 10;
  json r = Post(c, "/completion", ll);
  EXPECT_EQ(r["content"], ref["choices"][0]["text"]);
  EXPECT_EQ(r["tokens_predicted"].get<int>(), ref["usage"]["completion_tokens"].get<int>());
  const int prompt_n = static_cast<int>(tok.Encode(prompt, true).size());
  EXPECT_EQ(r["tokens_evaluated"].get<int>(), prompt_n);
  EXPECT_EQ(r["timings"]["prompt_n"].get<int>(), prompt_n);
  EXPECT_EQ(r["timings"]["predicted_n"], r["tokens_predicted"]);
  EXPECT_EQ(r["stop"], true);
  EXPECT_EQ(r["stop_type"], ref["choices"][0]["finish_reason"] == "length" ? "limit" : "eos");
  // n_predict in the OpenAI route is max_tokens.
  json np = common;
  np["n_predict"] = 10;
  EXPECT_EQ(Post(c, "/v1/completions", np)["choices"][0]["text"], ref["choices"][0]["text"]);
  np["max_tokens"] = 9;
  Post(c, "/v1/completions", np, 400);  // the two disagree
  // Streamed: the same text, llama-server's events, the last one whole.
  ll["stream"] = true;
  auto s = c.Post("/completion", ll.dump(), "application/json");
  ASSERT_TRUE(s && s->status == 200);
  EXPECT_EQ(s->get_header_value("Content-Type"), "text/event-stream");
  json last;
  EXPECT_EQ(LlamaStreamText(s->body, &last), r["content"].get<std::string>());
  EXPECT_EQ(last["stop"], true);
  EXPECT_EQ(last["tokens_predicted"], r["tokens_predicted"]);
  // A stop string: stop_type "word".
  json w = common;
  w["n_predict"] = 40;
  const std::string ten = ref["choices"][0]["text"];
  ASSERT_GE(ten.size(), 4u);
  w["stop"] = ten.substr(2, 2);
  json ws = Post(c, "/completion", w);
  EXPECT_EQ(ws["stop_type"], "word");
  EXPECT_EQ(ws["content"], ten.substr(0, 2));
  // n_predict -1 (the default): until EOS or the context is full.
  const int ctx = engine().context_length();
  std::string longp = Passage(0, 20000);
  std::vector<int> ids = tok.Encode(longp, true);
  ASSERT_GT(static_cast<int>(ids.size()), ctx);
  ids.resize(ctx - 6);
  std::vector<int> body_ids(ids.begin() + 1, ids.end());
  json full = Post(c, "/completion", {{"prompt", tok.Decode(body_ids)}, {"temperature", 0}});
  const int n = full["tokens_evaluated"].get<int>() + full["tokens_predicted"].get<int>();
  EXPECT_LE(n, ctx + 1);
  EXPECT_TRUE(full["stop_type"] == "eos" || n == ctx + 1) << full.dump();
  Post(c, "/completion", {{"prompt", {1, 2, 3}}}, 400);  // token arrays are not read
}

TEST_F(LlamaApiTest, Props) {
  ServerOptions o;
  o.parallel = 2;
  TestServer ts(engine(), o);
  auto c = ts.Client();
  auto r = c.Get("/props");
  ASSERT_TRUE(r && r->status == 200);
  const json p = json::parse(r->body);
  EXPECT_EQ(p["default_generation_settings"]["n_ctx"].get<int>(), engine().context_length());
  EXPECT_EQ(p["total_slots"].get<int>(), 2);
  EXPECT_EQ(p["default_generation_settings"]["params"]["n_predict"].get<int>(), -1);
  EXPECT_EQ(p["model_path"], kModel);
}

// id_slot picks the slot a request runs on (llama-server's field); out of
// range or not an integer: 400 naming it.
TEST_F(LlamaApiTest, IdSlotPicksTheSlot) {
  ServerOptions o;
  o.parallel = 2;
  TestServer ts(engine(), o);
  auto c = ts.Client();
  const std::string prompt = Passage(2000, 200);
  json r = Post(c, "/completion", {{"prompt", prompt}, {"n_predict", 3}, {"id_slot", 1}});
  EXPECT_EQ(r["id_slot"], 1);
  json slots = json::parse(c.Get("/slots")->body);
  EXPECT_EQ(slots[0]["n_tokens"].get<int>(), 0);  // slot 0 never ran
  EXPECT_GT(slots[1]["n_tokens"].get<int>(), 0);
  Post(c, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 2}, {"id_slot", 0}});
  EXPECT_GT(json::parse(c.Get("/slots")->body)[0]["n_tokens"].get<int>(), 0);
  EXPECT_EQ(Post(c, "/completion", {{"prompt", prompt}, {"n_predict", 1}, {"id_slot", -1}})["id_slot"], 0);
  json bad = Post(c, "/completion", {{"prompt", prompt}, {"id_slot", 2}}, 400);
  EXPECT_NE(bad["error"]["message"].get<std::string>().find("id_slot"), std::string::npos) << bad.dump();
  Post(c, "/completion", {{"prompt", prompt}, {"id_slot", "1"}}, 400);
  Post(c, "/v1/completions", {{"prompt", prompt}, {"id_slot", -2}}, 400);
}

// id_slot with cache_prompt: the slot's last session (prompt and answer)
// continues a prompt that begins with its tokens, under the same KV options
// (only the rest prefilled; the answer that of a fresh prefill); other KV
// options or another prompt start afresh.
TEST_F(LlamaApiTest, IdSlotWithCachePromptContinuesTheSlotsSession) {
  ServerOptions o;
  o.parallel = 2;
  TestServer ts(engine(), o);
  auto c = ts.Client();
  const io::Tokenizer& tok = engine().impl().tokenizer();
  const std::string prompt = Passage(4000, 300);
  const json base{{"temperature", 0}, {"kv_quant", "f32"}, {"cache_prompt", true}, {"return_tokens", true}};
  json a = base;
  a["prompt"] = prompt, a["n_predict"] = 4, a["id_slot"] = 1;
  json first = Post(c, "/completion", a);
  std::vector<int> held = tok.Encode(prompt, true);
  const std::vector<int> answer = first["tokens"].get<std::vector<int>>();
  ASSERT_EQ(answer.size(), 4u);
  held.insert(held.end(), answer.begin(), answer.end() - 1);  // the last sampled token is not fed
  const std::string next = prompt + tok.Decode(std::vector<int>(answer.begin(), answer.end() - 1)) + " and then";
  const std::vector<int> next_ids = tok.Encode(next, true);
  ASSERT_TRUE(next_ids.size() > held.size() && std::equal(held.begin(), held.end(), next_ids.begin()))
      << "the test's text does not re-tokenize to the slot's tokens";
  json b = base;
  b["prompt"] = next, b["n_predict"] = 6, b["id_slot"] = 1;
  json cont = Post(c, "/completion", b);
  EXPECT_EQ(cont["kvtrim"]["prompt_cache"]["reused_tokens"].get<int>(), static_cast<int>(held.size()));
  EXPECT_EQ(cont["kvtrim"]["prompt_cache"]["id"], "slot-1");
  EXPECT_EQ(cont["tokens_evaluated"].get<int>(), static_cast<int>(next_ids.size()));
  json fresh_req = base;
  fresh_req["prompt"] = next, fresh_req["n_predict"] = 6, fresh_req["cache_prompt"] = false, fresh_req["id_slot"] = 0;
  json fresh = Post(c, "/completion", fresh_req);
  EXPECT_EQ(cont["content"], fresh["content"]);
  // Other KV options on the slot: a fresh prefill.
  json other = b;
  other["kv_quant"] = "f16";
  EXPECT_EQ(Post(c, "/completion", other)["kvtrim"]["prompt_cache"]["reused_tokens"].get<int>(), 0);
}

// /slots: the slot's last completion saved as a stored context (then a
// context_id answering as a fork of that session would), restored, erased.
TEST_F(LlamaApiTest, SlotsSaveRestoreAndEraseThroughTheStore) {
  TestServer ts(engine(), {});
  auto c = ts.Client();
  const io::Tokenizer& tok = engine().impl().tokenizer();
  const std::string prompt = Passage(3000, 400);
  Post(c, "/slots/0?action=save", {{"filename", "early.bin"}}, 400);  // nothing run yet
  json done = Post(c, "/completion", {{"prompt", prompt}, {"n_predict", 6}, {"temperature", 0}, {"kv", "snapkv"},
                                      {"kv_budget", 40}, {"return_tokens", true}});
  // The slot holds the prompt and the 5 answer tokens fed back.
  const int held = static_cast<int>(tok.Encode(prompt, true).size()) + done["tokens_predicted"].get<int>() - 1;
  auto g = c.Get("/slots");
  ASSERT_TRUE(g && g->status == 200);
  EXPECT_EQ(json::parse(g->body)[0]["n_tokens"].get<int>(), held);
  json saved = Post(c, "/slots/0?action=save", {{"filename", "slot0.bin"}});
  EXPECT_EQ(saved["id_slot"], 0);
  EXPECT_EQ(saved["n_saved"].get<int>(), held);
  EXPECT_EQ(saved["kvtrim"]["context_id"], "slot0_bin");
  auto ctx = c.Get("/v1/contexts/slot0_bin");
  ASSERT_TRUE(ctx && ctx->status == 200);
  EXPECT_EQ(json::parse(ctx->body)["tokens"].get<int>(), held);
  json erased = Post(c, "/slots/0?action=erase", json::object());
  EXPECT_EQ(erased["n_erased"].get<int>(), held);
  EXPECT_EQ(json::parse(c.Get("/slots")->body)[0]["n_tokens"].get<int>(), 0);
  json restored = Post(c, "/slots/0?action=restore", {{"filename", "slot0.bin"}});
  EXPECT_EQ(restored["n_restored"].get<int>(), held);
  EXPECT_EQ(json::parse(c.Get("/slots")->body)[0]["n_tokens"].get<int>(), held);
  // The saved slot is a context: a question on it runs, and the slot then holds that completion.
  json q = Post(c, "/v1/completions", {{"context_id", "slot0_bin"}, {"prompt", " And"}, {"max_tokens", 3}});
  EXPECT_EQ(json::parse(c.Get("/slots")->body)[0]["n_tokens"].get<int>(),
            held + q["usage"]["prompt_tokens"].get<int>() + q["usage"]["completion_tokens"].get<int>() - 1);
  // Errors named.
  Post(c, "/slots/0?action=restore", {{"filename", "absent.bin"}}, 404);
  Post(c, "/slots/0?action=save", {{"filename", "../etc/passwd"}}, 400);
  Post(c, "/slots/0?action=save", json::object(), 400);
  Post(c, "/slots/0?action=copy", {{"filename", "x"}}, 400);
  Post(c, "/slots/7?action=save", {{"filename", "x"}}, 400);
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::server
