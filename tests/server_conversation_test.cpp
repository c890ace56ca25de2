// Conversations on a real server over loopback: turns answered as the
// library's Conversation answers them, two conversations apart, two
// requests on one served in arrival order, a conversation continued by a
// server restarted on the same store, and the errors a client can meet.
#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

#include "kvtrim/conversation.h"
#include "redis_server.h"
#include "server_fixture.h"

namespace kvtrim::server {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

class ConversationApiTest : public ServerTest {
 protected:
  static json Say(httplib::Client& c, const std::string& conv, const std::string& text, int n = 10,
                  const json& extra = json::object(), int want = 200) {
    json body{{"conversation", conv}, {"messages", {{{"role", "user"}, {"content", text}}}}, {"max_tokens", n},
              {"temperature", 0}, {"return_tokens", true}};
    body.update(extra);
    return Post(c, "/v1/chat/completions", body, want);
  }
  static std::vector<int> Tokens(const json& r) { return r["choices"][0]["tokens"].get<std::vector<int>>(); }
  static std::string Text(const json& r) { return r["choices"][0]["message"]["content"].get<std::string>(); }
};

const char* const kTurns[] = {"The code word is heron.", "Tell me about the mill.", "What was the code word?"};

TEST_F(ConversationApiTest, TurnsAreTheLibrarysConversation) {
  TestServer ts(engine(), {});
  auto c = ts.Client();
  SessionOptions so;
  so.kv.policy = "snapkv";
  so.kv.budget_tokens = 40;
  auto ref = Conversation::Create(engine(), so);
  ASSERT_TRUE(ref.ok());
  const io::Tokenizer& tok = engine().impl().tokenizer();
  for (int t = 0; t < 3; ++t) {
    const json extra = t == 0 ? json{{"kv", "snapkv"}, {"kv_budget", 40}} : json::object();
    json r = Say(c, "talk", kTurns[t], 10, extra);
    // The reference: the library's conversation, greedy.
    const std::vector<ChatMessage> added{{"user", kTurns[t]}};
    auto toks = ref.value()->TurnTokens(added);
    ASSERT_TRUE(toks.ok());
    ASSERT_TRUE(ref.value()->BeginTurn(added, toks.value()).ok());
    std::vector<int> want;
    Session& s = ref.value()->session();
    for (int i = 0; i < 10; ++i) {
      const int id = static_cast<int>(std::max_element(s.logits().begin(), s.logits().end()) - s.logits().begin());
      if (id == tok.eos() || id == tok.bos()) break;
      want.push_back(id);
      if (i + 1 < 10) {
        ASSERT_TRUE(s.Decode(id).ok());
      }
    }
    ref.value()->EndTurn(tok.Decode(want), want);
    EXPECT_EQ(Tokens(r), want) << "turn " << t;
    const json& conv = r["kvtrim"]["conversation"];
    EXPECT_EQ(conv["turns"].get<int>(), t + 1);
    EXPECT_EQ(conv["tokens"].get<int64_t>(), s.position());
    EXPECT_EQ(conv["entries"].get<size_t>(), s.impl().cache().EntriesHeld());
  }
  auto g = c.Get("/v1/conversations/talk");
  ASSERT_TRUE(g && g->status == 200);
  const json j = json::parse(g->body);
  ASSERT_EQ(j["messages"].size(), 6u);
  EXPECT_EQ(j["messages"][4]["content"], kTurns[2]);
  EXPECT_EQ(j["kv"]["policy"], "snapkv");
  // A client that sends the whole history, as OpenAI's API has it, adds only the new message.
  json whole = j["messages"];
  whole.push_back({{"role", "user"}, {"content", "Once more."}});
  json r = Post(c, "/v1/chat/completions", {{"conversation", "talk"}, {"messages", whole}, {"max_tokens", 4},
                                            {"temperature", 0}});
  EXPECT_EQ(r["kvtrim"]["conversation"]["turns"], 4);
  g = c.Get("/v1/conversations/talk");
  EXPECT_EQ(json::parse(g->body)["messages"].size(), 8u);
}

TEST_F(ConversationApiTest, ConversationGoesOnPastTheContextLength) {
  // A 160-token context: every turn fits, their sum does not; the server
  // re-bases the conversation's positions instead of answering 400.
  ServerOptions o;
  o.ctx = 160;
  TestServer ts(engine(), o);
  auto c = ts.Client();
  json last;
  for (int t = 0; t < 16; ++t) {
    const json extra = t == 0 ? json{{"kv", "snapkv"}, {"kv_budget", 40}} : json::object();
    last = Say(c, "long", kTurns[t % 3], 8, extra);
    const json& conv = last["kvtrim"]["conversation"];
    EXPECT_LE(conv["rope_position"].get<int64_t>(), 160) << "turn " << t;
  }
  const json& conv = last["kvtrim"]["conversation"];
  EXPECT_GT(conv["tokens"].get<int64_t>(), 2 * 160);
  EXPECT_LT(conv["rope_position"].get<int64_t>(), conv["tokens"].get<int64_t>());
  // A turn that cannot fit even re-based: 400, naming the context length.
  json r = Say(c, "long", "Again.", 200, json::object(), 400);
  EXPECT_NE(r["error"]["message"].get<std::string>().find("context length"), std::string::npos);
}

TEST_F(ConversationApiTest, TwoConversationsNeverSeeEachOthersTurns) {
  ServerOptions o;
  o.parallel = 2;
  TestServer ts(engine(), o);
  auto worker = [&](const std::string& id, const std::string& word) {
    auto c = ts.Client();
    for (int t = 0; t < 3; ++t) Say(c, id, word + " " + std::to_string(t), 6);
  };
  std::thread a(worker, "left", "alpha"), b(worker, "right", "omega");
  a.join();
  b.join();
  auto c = ts.Client();
  for (auto [id, word, other] : {std::tuple{"left", "alpha", "omega"}, std::tuple{"right", "omega", "alpha"}}) {
    const json j = json::parse(c.Get((std::string("/v1/conversations/") + id).c_str())->body);
    ASSERT_EQ(j["messages"].size(), 6u) << id;
    for (int t = 0; t < 3; ++t)
      EXPECT_EQ(j["messages"][2 * t]["content"], std::string(word) + " " + std::to_string(t)) << id;
    EXPECT_EQ(j["turns"], 3);
    (void)other;
  }
}

TEST_F(ConversationApiTest, RequestsOnOneConversationRunInArrivalOrder) {
  ServerOptions o;
  o.parallel = 2;
  TestServer ts(engine(), o);
  auto c = ts.Client();
  Say(c, "one", "First.", 2);
  // A streamed turn holds the conversation; a second request sent while it
  // streams waits, then runs after it, over its answer.
  std::atomic<bool> streaming{false};
  std::string first_body;
  std::thread first([&] {
    auto c1 = ts.Client();
    json body{{"conversation", "one"}, {"messages", {{{"role", "user"}, {"content", "Second."}}}},
              {"max_tokens", 60}, {"temperature", 0}, {"stream", true}, {"ignore_eos", true}};
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/chat/completions";
    req.body = body.dump();
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      first_body.append(data, n);
      streaming = true;
      return true;
    };
    auto res = c1.send(req);
    EXPECT_TRUE(res && res->status == 200);
  });
  while (!streaming) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  json r = Say(c, "one", "Third.", 2);
  first.join();
  EXPECT_EQ(r["kvtrim"]["conversation"]["turns"], 3);
  const json j = json::parse(c.Get("/v1/conversations/one")->body);
  ASSERT_EQ(j["messages"].size(), 6u);
  EXPECT_EQ(j["messages"][2]["content"], "Second.");
  EXPECT_EQ(j["messages"][4]["content"], "Third.");
  json last;
  EXPECT_EQ(j["messages"][3]["content"].get<std::string>(), StreamText(first_body, true, &last));
}

TEST_F(ConversationApiTest, RestartedServerContinuesTheStoredConversation) {
  const std::string dir = ::testing::TempDir() + "kvtrim-conv-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  ServerOptions o;
  o.context_store = dir;
  std::vector<int> uninterrupted;
  {
    TestServer ts(engine(), o);
    auto c = ts.Client();
    Post(c, "/v1/conversations", json{{"id", "kept"}, {"kv", "snapkv"}, {"kv_budget", 40}});
    Post(c, "/v1/conversations", json{{"id", "other"}});
    Say(c, "kept", kTurns[0], 12);
    Say(c, "kept", kTurns[1], 12);
    uninterrupted = Tokens(Say(c, "kept", kTurns[2], 12));
  }
  {  // the same two turns, then the server goes away
    TestServer ts(engine(), o);
    auto c = ts.Client();
    Post(c, "/v1/conversations/", json{{"id", "again"}}, 404);  // not a route
    Post(c, "/v1/conversations", json{{"id", "again"}, {"kv", "snapkv"}, {"kv_budget", 40}});
    Say(c, "again", kTurns[0], 12);
    Say(c, "again", kTurns[1], 12);
  }
  TestServer ts(engine(), o);
  auto c = ts.Client();
  const json listed = json::parse(c.Get("/v1/conversations")->body);
  EXPECT_EQ(listed["data"].size(), 3u);
  json r = Say(c, "again", kTurns[2], 12);
  EXPECT_EQ(Tokens(r), uninterrupted);
  // One stored before its first turn, read back empty, takes its first turn.
  EXPECT_EQ(Say(c, "other", kTurns[0], 4)["kvtrim"]["conversation"]["turns"], 1);
  EXPECT_EQ(r["kvtrim"]["conversation"]["turns"], 3);
  auto d = c.Delete("/v1/conversations/again");
  ASSERT_TRUE(d && d->status == 200);
  EXPECT_EQ(c.Get("/v1/conversations/again")->status, 404);
  EXPECT_FALSE(std::filesystem::exists(dir + "/conv/again.kvc"));
  std::filesystem::remove_all(dir);
}

// With a store, at most --conversations-in-memory conversations stay
// loaded; a dropped one is read back when named and goes on as if it had
// stayed.
TEST_F(ConversationApiTest, IdleConversationsBeyondTheBoundAreReadBack) {
  const std::string dir = ::testing::TempDir() + "kvtrim-conv-bound-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  const json kv{{"kv", "snapkv"}, {"kv_budget", 40}};
  std::vector<int> want;
  {
    TestServer plain(engine(), {});
    auto c = plain.Client();
    Say(c, "a", kTurns[0], 8, kv);
    want = Tokens(Say(c, "a", kTurns[1], 8));
  }
  ServerOptions o;
  o.context_store = dir;
  o.conversations_in_memory = 2;
  TestServer ts(engine(), o);
  auto c = ts.Client();
  for (const char* id : {"a", "b", "c", "d"}) Say(c, id, kTurns[0], 8, kv);
  json list = json::parse(c.Get("/v1/conversations")->body);
  EXPECT_EQ(list["data"].size(), 4u);
  EXPECT_LE(list["in_memory"].get<int>(), 2);
  json r = Say(c, "a", kTurns[1], 8);  // "a" was dropped: read back from the store
  EXPECT_EQ(Tokens(r), want);
  EXPECT_EQ(r["kvtrim"]["conversation"]["turns"], 2);
  EXPECT_LE(json::parse(c.Get("/v1/conversations")->body)["in_memory"].get<int>(), 2);
  std::filesystem::remove_all(dir);
}

// Without a store nothing can be set aside: at most --conversations-in-memory
// conversations exist; one more is a 503 naming the bound, over either
// route, while the ones held go on; deleting one makes room.
TEST_F(ConversationApiTest, WithoutAStoreTheBoundRefusesNewConversations) {
  ServerOptions o;
  o.conversations_in_memory = 2;
  TestServer ts(engine(), o);
  auto c = ts.Client();
  const json kv{{"kv", "snapkv"}, {"kv_budget", 40}};
  Say(c, "a", kTurns[0], 4, kv);
  Say(c, "b", kTurns[0], 4, kv);
  json r = Say(c, "c", kTurns[0], 4, kv, 503);
  EXPECT_NE(r["error"]["message"].get<std::string>().find("--conversations-in-memory"), std::string::npos) << r.dump();
  EXPECT_EQ(r["error"]["message"].get<std::string>().find("conversation store"), std::string::npos) << r.dump();
  r = Post(c, "/v1/conversations", json{{"id", "c"}}, 503);
  EXPECT_NE(r["error"]["message"].get<std::string>().find("--context-store"), std::string::npos) << r.dump();
  EXPECT_EQ(Say(c, "a", kTurns[1], 4)["kvtrim"]["conversation"]["turns"], 2);  // the ones held go on
  EXPECT_EQ(c.Delete("/v1/conversations/b")->status, 200);
  EXPECT_EQ(Say(c, "c", kTurns[0], 4, kv)["kvtrim"]["conversation"]["turns"], 1);
  EXPECT_EQ(json::parse(c.Get("/v1/conversations")->body)["data"].size(), 2u);
}

TEST_F(ConversationApiTest, RedisStoppedMidRunIsA503ThenServiceResumes) {
  const std::string dir = ::testing::TempDir() + "kvtrim-conv-redis-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  test_redis::RedisServer redis(0, dir);
  REQUIRE_REDIS(redis);
  const json kv{{"kv", "snapkv"}, {"kv_budget", 40}};
  std::vector<int> want;  // the third turn of a conversation that never met a fault
  {
    TestServer plain(engine(), {});
    auto c = plain.Client();
    Say(c, "x", kTurns[0], 8, kv);
    Say(c, "x", kTurns[1], 8);
    want = Tokens(Say(c, "x", kTurns[2], 8));
  }
  ServerOptions o;
  o.context_store = redis.url;
  {
    TestServer ts(engine(), o);
    auto c = ts.Client();
    Say(c, "r", kTurns[0], 8, kv);
    Say(c, "r", kTurns[1], 8);
    redis.Stop();
    // A turn that cannot be stored is not acknowledged: 503 naming the store.
    json r = Say(c, "r", kTurns[2], 8, json::object(), 503);
    EXPECT_NE(r["error"]["message"].get<std::string>().find("redis://"), std::string::npos) << r.dump();
    Say(c, "r", kTurns[2], 8, json::object(), 503);  // nor the next, while the store is down
    Say(c, "new-one", "Hello.", 2, json::object(), 503);  // a new one needs the store
    // What does not need the store is served meanwhile.
    Post(c, "/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 2}});
    redis.Start();
    REQUIRE_REDIS(redis);
    // Service resumes by itself, from what was acknowledged.
    r = Say(c, "r", kTurns[2], 8);
    EXPECT_EQ(Tokens(r), want);
    EXPECT_EQ(r["kvtrim"]["conversation"]["turns"], 3);
  }
  TestServer again(engine(), o);  // nothing acknowledged was lost
  auto c = again.Client();
  const json j = json::parse(c.Get("/v1/conversations/r")->body);
  EXPECT_EQ(j["turns"], 3);
  ASSERT_EQ(j["messages"].size(), 6u);
  EXPECT_EQ(j["messages"][4]["content"], kTurns[2]);
  redis.Stop();
  std::filesystem::remove_all(dir);
}

// The directory store on a full disk (a small tmpfs filled up): a turn that
// cannot be written is a 503 naming the cause, requests that do not need
// the store are served, and once space is freed the conversation goes on
// from its last acknowledged turn, with no temporary file left behind.
TEST_F(ConversationApiTest, FullDiskIsA503ThenServiceResumes) {
  const std::string dir = ::testing::TempDir() + "kvtrim-conv-full-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  if (test::RunCommand("mount -t tmpfs -o size=4m tmpfs " + dir + " 2>&1").code != 0) {
    std::filesystem::remove_all(dir);
    GTEST_SKIP() << "mounting a tmpfs needs root (CAP_SYS_ADMIN): the full-disk case is not run";
  }
  struct Unmount {
    std::string d;
    ~Unmount() {
      test::RunCommand("umount " + d + " 2>&1");
      std::filesystem::remove_all(d);
    }
  } unmount{dir};
  ServerOptions o;
  o.context_store = dir;
  TestServer ts(engine(), o);
  auto c = ts.Client();
  Say(c, "d", kTurns[0], 8, {{"kv", "snapkv"}, {"kv_budget", 40}});
  {  // fill the disk
    std::ofstream fill(dir + "/filler", std::ios::binary);
    const std::string block(1 << 16, 'x');
    while (fill.write(block.data(), block.size()) && fill.flush()) {
    }
  }
  json r = Say(c, "d", kTurns[1], 8, json::object(), 503);
  EXPECT_NE(r["error"]["message"].get<std::string>().find("No space left"), std::string::npos) << r.dump();
  Post(c, "/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 2}});  // no store needed: served
  EXPECT_EQ(json::parse(c.Get("/v1/conversations/d")->body)["turns"], 1);  // as acknowledged
  r = Post(c, "/v1/contexts", {{"text", Passage(1000, 400)}}, 503);  // a stored context needs the disk too
  EXPECT_NE(r["error"]["message"].get<std::string>().find("No space left"), std::string::npos) << r.dump();
  std::filesystem::remove(dir + "/filler");
  r = Say(c, "d", kTurns[1], 8);  // resumes by itself
  EXPECT_EQ(r["kvtrim"]["conversation"]["turns"], 2);
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
}

TEST_F(ConversationApiTest, ErrorsNameTheProblem) {
  TestServer ts(engine(), {});
  auto c = ts.Client();
  Say(c, "e", "Hello.", 2, {{"kv", "snapkv"}, {"kv_budget", 40}});
  json r = Say(c, "e", "Again.", 2, {{"kv", "h2o"}}, 400);  // its KV options are fixed
  EXPECT_NE(r["error"]["message"].get<std::string>().find("existing conversation"), std::string::npos);
  r = Say(c, "f", "Hello.", 2, {{"kv", "kvzip-am"}, {"kv_ratio", 0.5}}, 400);
  EXPECT_NE(r["error"]["message"].get<std::string>().find("reference pass"), std::string::npos);
  r = Say(c, "f", "Hello.", 2, {{"kv", "am"}, {"kv_budget", 40}}, 400);  // am: a ratio, not a token budget
  EXPECT_NE(r["error"]["message"].get<std::string>().find("--kv-ratio"), std::string::npos);
  Say(c, "bad id!", "Hello.", 2, json::object(), 400);
  Say(c, "g", "Hello.", 2, {{"context_id", "ctx-1"}}, 400);
  EXPECT_EQ(c.Get("/v1/conversations/nobody")->status, 404);
  EXPECT_EQ(c.Delete("/v1/conversations/nobody")->status, 404);
  Post(c, "/v1/conversations", {{"id", "e"}}, 409);
  r = Post(c, "/v1/conversations", json::object());
  EXPECT_EQ(r["id"].get<std::string>().rfind("conv-", 0), 0u);
  EXPECT_EQ(r["turns"], 0);
  // The context length binds the conversation's positions: a clear 400.
  r = Say(c, "e", Passage(0, 200), 1 << 12, json::object(), 400);
  EXPECT_NE(r["error"]["message"].get<std::string>().find("context length"), std::string::npos);
  EXPECT_EQ(Say(c, "e", "Still here?", 2)["kvtrim"]["conversation"]["turns"], 2);
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::server
