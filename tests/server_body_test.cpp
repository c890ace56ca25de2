// Request bodies as clients send them: JSON whatever the Content-Type says
// (curl -d sends application/x-www-form-urlencoded, which cpp-httplib would
// parse as a form and refuse over 8 KB), every refusal with its real cause
// (size, type, route), the sampling fields in a request, and
// docs/request-fields.md as generated from the tables the parser reads.
#include <gtest/gtest.h>

#include "engine/engine_impl.h"
#include "server_fixture.h"

namespace kvtrim::server {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

constexpr const char* kForm = "application/x-www-form-urlencoded";  // curl -d's type

TEST_F(ServerTest, ALongDocumentPostedWithCurlsContentTypeIsStored) {
  // 200 KB of text (about 64K tokens): the default model read at 64K with
  // YaRN, kept in a window as it is prefilled 2,048 tokens at a time.
  RopeOverrides rope;
  rope.scaling = "yarn", rope.scale = 64, rope.yarn_orig_ctx = 1024;
  auto e = Engine::Load({test::ModelPath(kModel), 2, rope, 65536});
  ASSERT_TRUE(e.ok()) << e.error().message;
  TestServer s(*e.value(), {});
  auto c = s.Client();
  const std::string text = test::ReadFile(test::SharedPath("data/frankenstein.txt")).substr(0, 200000);
  const std::string body =
      json{{"text", text}, {"kv", "window"}, {"kv_ratio", 0.05}, {"prefill_chunk", 2048}}.dump();
  ASSERT_GT(body.size(), 200000u);
  auto r = c.Post("/v1/contexts", body, kForm);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body.substr(0, 300);
  const json ctx = json::parse(r->body);
  EXPECT_EQ(ctx["tokens"].get<size_t>(), e.value()->impl().tokenizer().Encode(text, true).size());
  EXPECT_LT(ctx["kv_bytes"].get<double>(), 0.06 * ctx["kv_bytes_full"].get<double>());
  auto l = c.Get(("/v1/contexts/" + ctx["id"].get<std::string>()).c_str());
  ASSERT_TRUE(l);
  EXPECT_EQ(l->status, 200);
}

TEST_F(ServerTest, EveryContentTypeIsReadAsJson) {
  TestServer s(engine(), {});
  auto c = s.Client();
  const json req = {{"prompt", "It was a dark and stormy night"}, {"max_tokens", 6}, {"temperature", 0},
                    {"return_tokens", true}};
  auto want = c.Post("/v1/completions", req.dump(), "application/json");
  ASSERT_TRUE(want && want->status == 200);
  for (const char* type : {kForm, "text/plain", "application/octet-stream"}) {
    auto r = c.Post("/v1/completions", req.dump(), type);
    ASSERT_TRUE(r) << type;
    EXPECT_EQ(r->status, 200) << type << ": " << r->body;
    EXPECT_EQ(json::parse(r->body)["choices"][0]["tokens"], json::parse(want->body)["choices"][0]["tokens"]) << type;
  }
}

TEST_F(ServerTest, EveryRefusalNamesItsCause) {
  ServerOptions o;
  o.max_body_bytes = 64 << 10;
  TestServer s(engine(), o);
  auto c = s.Client();
  auto message = [](const httplib::Result& r) { return json::parse(r->body)["error"]["message"].get<std::string>(); };
  // Size: over the limit, whatever the type.
  const std::string big = json{{"text", std::string(100000, 'a')}}.dump();
  for (const char* type : {kForm, "application/json"}) {
    auto r = c.Post("/v1/contexts", big, type);
    ASSERT_TRUE(r) << type;
    EXPECT_EQ(r->status, 413) << type;
    EXPECT_NE(message(r).find("request body over the limit of 65536 bytes"), std::string::npos) << r->body;
  }
  // Route: named, with the routes there are.
  auto nr = c.Post("/v1/nothing", "{}", "application/json");
  ASSERT_TRUE(nr);
  EXPECT_EQ(nr->status, 404);
  EXPECT_NE(message(nr).find("no route POST /v1/nothing"), std::string::npos) << nr->body;
  // Type: a multipart form is not read, and says how to send the body.
  auto mp = c.Post("/v1/contexts", "--b\r\nContent-Disposition: form-data; name=\"text\"\r\n\r\nhi\r\n--b--\r\n",
                   "multipart/form-data; boundary=b");
  ASSERT_TRUE(mp);
  EXPECT_EQ(mp->status, 415);
  EXPECT_NE(message(mp).find("multipart"), std::string::npos) << mp->body;
  // Content: not JSON.
  auto nj = c.Post("/v1/contexts", "text=hello", kForm);
  ASSERT_TRUE(nj);
  EXPECT_EQ(nj->status, 400);
  EXPECT_NE(message(nj).find("invalid JSON"), std::string::npos) << nj->body;
}

TEST_F(ServerTest, SamplingFieldsReachTheSampler) {
  TestServer s(engine(), {});
  auto c = s.Client();
  const std::string context = Passage(3000, 1200), q = "\nQuestion: who wrote the letter?\nAnswer:";
  const std::string id = Post(c, "/v1/contexts", {{"text", context}})["id"];
  KvOptions kv;
  for (int i = 0; i < 4; ++i) {
    SamplingOptions so;
    so.temp = 1.2f, so.seed = 7 + i, so.top_k = i == 0 ? 0 : 5 * i, so.top_p = i % 2 ? 0.95f : 1.f;
    so.min_p = i == 3 ? 0.1f : 0.f, so.repeat_penalty = i >= 2 ? 1.5f : 1.f, so.repeat_last_n = 16;
    json r = Post(c, "/v1/completions",
                  {{"context_id", id}, {"prompt", q}, {"max_tokens", 12}, {"temperature", so.temp}, {"seed", so.seed},
                   {"top_k", so.top_k}, {"top_p", so.top_p}, {"min_p", so.min_p},
                   {"repeat_penalty", so.repeat_penalty}, {"repeat_last_n", so.repeat_last_n},
                   {"return_tokens", true}});
    EXPECT_EQ(r["choices"][0]["tokens"].get<std::vector<int>>(), Reference(kv, context, q, so, 12)) << i;
  }
  for (const json& bad : {json{{"prompt", "a"}, {"top_k", -1}}, json{{"prompt", "a"}, {"min_p", 2}},
                          json{{"prompt", "a"}, {"repeat_penalty", 0}}, json{{"prompt", "a"}, {"top_k", 1.5}}})
    Post(c, "/v1/completions", bad, 400);
}

TEST(RequestFields, TheDocsListIsTheGeneratedOne) {
  const std::string md = RequestFieldsMarkdown();
  EXPECT_EQ(test::ReadFile(std::string(KVTRIM_SOURCE_DIR) + "/docs/request-fields.md"), md)
      << "regenerate: kvtrim serve --request-fields > docs/request-fields.md";
  const test::CmdResult r = test::RunCommand(std::string(KVTRIM_CLI) + " serve --request-fields");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, md);
  for (const char* field : {"`top_k` | completions, chat | integer in [0, 2147483647] | 40 |", "`min_p`",
                            "`repeat_penalty`", "`repeat_last_n`", "`kv_ratio`", "`kv_params`", "`cache_prompt`",
                            "`text` | contexts"})
    EXPECT_NE(md.find(field), std::string::npos) << field;
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::server
