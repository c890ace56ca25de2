// llama-server's routes against answers recorded from llama.cpp's own
// llama-server on the default model (tests/data/llama-server/): the same
// request to `kvtrim serve` answers the same content, token counts and stop
// type; every other field is there with the same JSON type, or is one that
// docs/server.md names as not sent.
#include <fstream>
#include <sstream>

#include "server_fixture.h"

namespace kvtrim::server {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

json Recorded(const std::string& name) {
  return json::parse(test::ReadFile(std::string(KVTRIM_SOURCE_DIR) + "/tests/data/llama-server/" + name + ".json"));
}

// The fields docs/server.md names as not sent: its "Differences from
// llama-server" row of /completion's answer, from "not sent" to the row's end.
const std::string& Docs() {
  static const std::string d = [] {
    const std::string all = test::ReadFile(std::string(KVTRIM_SOURCE_DIR) + "/docs/server.md");
    const size_t row = all.find("| `/completion`'s answer |");
    const size_t a = all.find("not sent", row);
    EXPECT_NE(row, std::string::npos);
    EXPECT_NE(a, std::string::npos);
    return row == std::string::npos || a == std::string::npos ? std::string() : all.substr(a, all.find('\n', a) - a);
  }();
  return d;
}

// Every field of `want` is in `got` (equal where `equal` names it, else of
// the same type; objects compared the same way one level down), or named in
// the docs as not sent (`name` or `parent.name`).
void CompareFields(const json& want, const json& got, const std::set<std::string>& equal, const std::string& at) {
  for (const auto& [key, w] : want.items()) {
    const std::string name = at.empty() ? key : at + "." + key;
    if (!got.contains(key)) {
      EXPECT_NE(Docs().find("`" + name + "`"), std::string::npos)
          << "llama-server sends '" << name << "': kvtrim neither sends it nor documents that it does not";
      continue;
    }
    const json& g = got[key];
    if (equal.count(name)) {
      EXPECT_EQ(g, w) << name;
    } else if (w.is_object()) {
      ASSERT_TRUE(g.is_object()) << name;
      CompareFields(w, g, equal, name);
    } else if (w.is_number()) {
      EXPECT_TRUE(g.is_number()) << name << ": " << g.dump();
    } else {
      EXPECT_EQ(g.type_name(), std::string(w.type_name())) << name << ": " << g.dump() << " vs " << w.dump();
    }
  }
}

class LlamaRecordedTest : public ServerTest {};

TEST_F(LlamaRecordedTest, CompletionAnswersAsLlamaServerDid) {
  TestServer ts(engine(), {});
  auto c = ts.Client();
  for (const char* name : {"completion", "completion_stop"}) {
    const json rec = Recorded(name);
    json got = Post(c, rec["path"].get<std::string>(), rec["request"]);
    CompareFields(rec["response"], got,
                  {"content", "stop", "tokens_predicted", "tokens_evaluated", "stop_type", "truncated",
                   "stopping_word", "has_new_line", "tokens_cached", "prompt", "index", "tokens", "id_slot",
                   "timings.prompt_n", "timings.predicted_n", "generation_settings.n_predict",
                   "generation_settings.temperature", "generation_settings.stop", "generation_settings.max_tokens",
                   "generation_settings.ignore_eos", "generation_settings.stream"},
                  "");
  }
}

TEST_F(LlamaRecordedTest, TokenizeAndDetokenizeAnswerAsLlamaServerDid) {
  TestServer ts(engine(), {});
  auto c = ts.Client();
  for (const char* name : {"tokenize", "detokenize"}) {
    const json rec = Recorded(name);
    EXPECT_EQ(Post(c, rec["path"].get<std::string>(), rec["request"]), rec["response"]) << name;
  }
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::server
