// `kvtrim chat` driven through a pseudo-terminal (tmux send-keys and
// capture-pane), as a person types: three turns, /stats, Ctrl-C that leaves
// the program running, and a second `kvtrim chat --save DIR` that resumes
// the conversation where the first left it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "test_util.h"

namespace kvtrim {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

// One tmux server of its own (-L), one window running a command.
class Tmux {
 public:
  explicit Tmux(const std::string& command)
      : sock_("kvtrim-chat-" + std::to_string(::getpid()) + "-" + std::to_string(next_++)) {
    Run("new-session -d -x 200 -y 60 '" + command + "'");
  }
  ~Tmux() { Run("kill-server"); }
  test::CmdResult Run(const std::string& args) const {
    return test::RunCommand("tmux -L " + sock_ + " " + args + " 2>&1");
  }
  void Keys(const std::string& keys) const { Run("send-keys -t 0 " + keys); }
  void Line(const std::string& text) const { Run("send-keys -t 0 -l '" + text + "'"), Keys("Enter"); }
  std::string Screen() const { return Run("capture-pane -p -S -200 -t 0").out; }
  // Waits (at most 120 s) until the screen holds `text` at least `times` times.
  bool WaitFor(const std::string& text, int times = 1) const {
    for (int i = 0; i < 1200; ++i) {
      if (Count(Screen(), text) >= times) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  // Occurrences of `text`; "> " counts the lines a prompt begins (the pane
  // drops a line's trailing spaces, so an empty prompt reads ">").
  static int Count(const std::string& s, const std::string& text) {
    int n = 0;
    if (text == "> ") {
      for (size_t at = 0; at < s.size(); at = s.find('\n', at) == std::string::npos ? s.size() : s.find('\n', at) + 1)
        n += s[at] == '>';
      return n;
    }
    for (size_t at = s.find(text); at != std::string::npos; at = s.find(text, at + 1)) ++n;
    return n;
  }

 private:
  std::string sock_;
  inline static int next_ = 0;
};

TEST(ChatCli, ThreeTurnsStatsInterruptAndResume) {
  if (!std::filesystem::exists(test::ModelPath("needle-v1-3.7M-f32.gguf"))) GTEST_SKIP() << "default model absent";
  ASSERT_EQ(test::RunCommand("command -v tmux >/dev/null").code, 0)
      << "tmux is needed to drive the chat through a terminal: `bash scripts/setup.sh` installs it";
  const std::string dir = ::testing::TempDir() + "kvtrim-chat-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  const std::string chat = std::string(KVTRIM_CLI) + " chat -m " + test::ModelPath("needle-v1-3.7M-f32.gguf") +
                           " -t 1 --temp 0 --kv snapkv --kv-budget 40 --save " + dir +
                           " -c 8192 --rope-scaling yarn --rope-scale 8 --yarn-orig-ctx 1024";
  {
    Tmux t(chat + " -n 12; echo CHAT-EXITED $?; sleep 60");
    ASSERT_TRUE(t.WaitFor("> ")) << t.Screen();
    t.Line("Hello there.");
    ASSERT_TRUE(t.WaitFor("> ", 2)) << t.Screen();
    t.Line("Tell me about the mill.");
    ASSERT_TRUE(t.WaitFor("> ", 3)) << t.Screen();
    t.Line("And the river?");
    ASSERT_TRUE(t.WaitFor("> ", 4)) << t.Screen();
    t.Line("/stats");
    ASSERT_TRUE(t.WaitFor("turns 3, tokens seen")) << t.Screen();
    // Ctrl-C at the prompt does not end the program: a new prompt, and /stats still answers.
    t.Keys("C-c");
    t.Line("/stats");
    ASSERT_TRUE(t.WaitFor("turns 3, tokens seen", 2)) << t.Screen();
    EXPECT_EQ(Tmux::Count(t.Screen(), "CHAT-EXITED"), 0) << t.Screen();
    t.Line("/quit");
    ASSERT_TRUE(t.WaitFor("CHAT-EXITED 0")) << t.Screen();
  }
  ASSERT_TRUE(std::filesystem::exists(dir + "/conversation.kvc"));
  {
    // A long answer stopped by Ctrl-C: the program goes on, the turn is kept.
    // (At 8,192 positions with YaRN the answer could run for thousands of tokens.)
    Tmux t(chat + " -n 8000; echo CHAT-EXITED $?; sleep 60");
    ASSERT_TRUE(t.WaitFor("resumed")) << t.Screen();
    EXPECT_TRUE(t.WaitFor("3 turns")) << t.Screen();
    ASSERT_TRUE(t.WaitFor("> ")) << t.Screen();
    t.Line("Tell me a very long story about the mill and the river.");
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    t.Keys("C-c");
    ASSERT_TRUE(t.WaitFor("> ", 2)) << t.Screen();
    ASSERT_TRUE(t.WaitFor("[stopped]")) << t.Screen();
    t.Line("/stats");
    ASSERT_TRUE(t.WaitFor("turns 4, tokens seen")) << t.Screen();
    const std::string screen = t.Screen();
    const long seen = std::stol(screen.substr(screen.rfind("tokens seen ") + 12));
    EXPECT_LT(seen, 4000) << "the answer did not stop at Ctrl-C\n" << screen;
    t.Keys("C-d");
    ASSERT_TRUE(t.WaitFor("CHAT-EXITED 0")) << t.Screen();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim
