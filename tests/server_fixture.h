// The server tests' fixture: a real `kvtrim serve` (Server) on an
// ephemeral loopback port, a real HTTP client, and the in-process reference
// answers the server's must equal (server_test.cpp, server_store_test.cpp).
#pragma once
#include <httplib.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine_impl.h"
#include "io/tokenizer.h"
#include "kvtrim/engine.h"
#include "kvtrim/server.h"
#include "test_util.h"

namespace kvtrim::server {

using nlohmann::json;

inline const char* kModel = "needle-v1-3.7M-f32.gguf";

struct TestServer {
  std::unique_ptr<Server> srv;
  std::thread th;
  int port = -1;
  TestServer(const Engine& e, ServerOptions o) {
    o.port = 0;
    o.model_name = kModel;
    auto s = Server::Create(e, o);
    if (!s.ok()) {
      ADD_FAILURE() << s.error().message;
      return;
    }
    srv = std::move(s.value());
    Status st = srv->Bind();
    EXPECT_TRUE(st.ok()) << st.message();
    port = srv->port();
    th = std::thread([this] { (void)srv->Run(); });
  }
  ~TestServer() {
    if (srv) srv->Stop();
    if (th.joinable()) th.join();
  }
  httplib::Client Client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(300, 0);  // sanitizer builds on a loaded machine are slow
    return c;
  }
};

class ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(test::ModelPath(kModel))) return;
    engine_ = test::LoadEngine(kModel, 2).release();
  }
  static void TearDownTestSuite() {
    delete engine_;
    engine_ = nullptr;
  }
  void SetUp() override {
    if (!engine_) GTEST_SKIP() << "model " << kModel << " absent";
  }
  static const Engine& engine() { return *engine_; }
  inline static Engine* engine_ = nullptr;

  static json Post(httplib::Client& c, const std::string& path, const json& body, int want = 200) {
    auto r = c.Post(path.c_str(), body.dump(), "application/json");
    EXPECT_TRUE(r) << path;
    if (!r) return json();
    EXPECT_EQ(r->status, want) << path << " " << body.dump() << " -> " << r->body;
    return json::parse(r->body, nullptr, false);
  }
  // A passage of the haystack without single quotes (it goes through a shell).
  static std::string Passage(size_t from, size_t len) {
    std::string t = test::ReadFile(test::SharedPath("data/frankenstein.txt")).substr(from, len);
    for (char& ch : t)
      if (ch == '\'' || ch == '"' || ch == '\\' || ch == '$' || ch == '`') ch = ' ';
    return t;
  }
  static double Metric(httplib::Client& c, const std::string& name) {
    auto r = c.Get("/metrics");
    EXPECT_TRUE(r && r->status == 200);
    std::istringstream is(r ? r->body : "");
    std::string line;
    while (std::getline(is, line))
      if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
    ADD_FAILURE() << "no metric " << name;
    return -1;
  }
  // The greedy/sampled answer to `question` after a context, computed here
  // with a session and the sampler alone: prefill + compress the context,
  // prefill the question, sample n tokens (n - 1 fed back).
  static std::vector<int> Reference(const KvOptions& kv, const std::string& context, const std::string& question,
                                    const SamplingOptions& so, int n) {
    SessionOptions opts;
    opts.kv = kv;
    auto s = Session::Create(engine(), opts);
    EXPECT_TRUE(s.ok());
    const io::Tokenizer& tok = engine().impl().tokenizer();
    EXPECT_TRUE(s.value()->Prefill(tok.Encode(context, true)).ok());
    EXPECT_TRUE(s.value()->Compress().ok());
    EXPECT_TRUE(s.value()->Prefill(tok.Encode(question, false)).ok());
    Sampler sampler(so);
    AcceptHistory(*s.value(), sampler);  // the repetition penalty's look-back
    std::vector<int> out;
    for (int i = 0; i < n; ++i) {
      int id = sampler.Sample(s.value()->logits());
      sampler.Accept(id);
      if (id == tok.eos() || id == tok.bos()) break;
      out.push_back(id);
      if (i + 1 < n) {
        EXPECT_TRUE(s.value()->Decode(id).ok());
      }
    }
    return out;
  }
  // The text of an SSE stream's chunks, and its last data event before [DONE].
  static std::string StreamText(const std::string& body, bool chat, json* last) {
    std::string text;
    size_t pos = 0;
    bool done = false;
    while ((pos = body.find("data: ", pos)) != std::string::npos) {
      size_t end = body.find("\n\n", pos);
      std::string data = body.substr(pos + 6, end - pos - 6);
      pos = end;
      if (data == "[DONE]") {
        done = true;
        continue;
      }
      json ev = json::parse(data);
      const json& ch = ev["choices"][0];
      if (chat) text += ch["delta"].value("content", "");
      else text += ch["text"].get<std::string>();
      *last = ev;
    }
    EXPECT_TRUE(done) << body;
    return text;
  }
};

}  // namespace kvtrim::server
