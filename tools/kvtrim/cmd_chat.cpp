// `kvtrim chat`: an interactive conversation at the terminal (llama-cli's
// conversation mode) whose cache the KV policy holds to its budget after
// every turn (kvtrim::Conversation); `--save DIR` keeps it for a later
// `kvtrim chat --save DIR`. Ctrl-C stops a generation, not the program.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

#include "checks.h"
#include "commands.h"
#include "kv_flags.h"
#include "kvtrim/chat.h"
#include "kvtrim/conversation.h"
#include "kvtrim/engine.h"
#include "kvtrim/prompt.h"
#include "kvtrim/report.h"
#include "model_flags.h"
#include "sampling_flags.h"

namespace kvtrim::cli {
namespace {

volatile std::sig_atomic_t g_interrupted = 0;

extern "C" void OnInterrupt(int) { g_interrupted = 1; }

// SIGINT sets a flag instead of ending the process; reads are not restarted,
// so a Ctrl-C at the prompt returns from the read.
void CatchInterrupt() {
  struct sigaction sa {};
  sa.sa_handler = OnInterrupt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, nullptr);
}

struct ChatOpts {
  RopeOverrides rope;
  std::string model, system, save;
  int n = 256, threads = 0, ctx = 0;
  SamplingOptions sampling;
  KvFlags kv;
};

int Fail(const std::string& message) {
  std::fprintf(stderr, "kvtrim chat: %s\n", message.c_str());
  return 1;
}

// /stats: what the conversation holds and what its policy did.
void PrintStats(const Conversation& c) {
  const KvReport r = DescribeKv(c.session());
  std::printf("turns %d, tokens seen %lld, entries held %zu, kv bytes %zu (held %zu, peak %zu over every turn, "
              "%zu this turn), a full f32 cache %zu bytes, policy %s, evicted %lld\n",
              c.turns(), static_cast<long long>(r.logical_length), r.entries, r.bytes_used, r.bytes_held,
              c.peak_kv_bytes(), r.peak_bytes, r.bytes_full, r.policy.c_str(), static_cast<long long>(r.evictions));
  if (!r.counters.empty()) {
    std::printf("kv counters:");
    for (const auto& [name, v] : r.counters) std::printf(" %s %lld", name.c_str(), static_cast<long long>(v));
    std::printf("\n");
  }
}

// One turn: the user's line (and the system message before the first),
// the answer printed as it is sampled. Errors are the session's.
Status Turn(const Engine& e, Conversation& c, const ChatOpts& o, const std::string& line) {
  std::vector<ChatMessage> added;
  if (c.messages().empty() && !o.system.empty()) added.push_back({"system", o.system});
  added.push_back({"user", line});
  auto tokens = c.TurnTokens(added);
  if (!tokens.ok()) return tokens.error();
  // Room for the answer too: past the context length the session is
  // re-based first (Session::MakeRoom), at most half the context kept for it.
  const int64_t ctx = c.session().ctx();
  KVTRIM_RETURN_IF_ERROR(c.BeginTurn(added, tokens.value(), static_cast<size_t>(std::clamp<int64_t>(o.n, 0, ctx / 2))));
  const int64_t room = ctx - c.session().rope_position();
  SamplingOptions sp = o.sampling;
  sp.stop_ids = EndOfTurnIds(e, DetectChatFamily(ChatTemplate(e)));
  std::vector<int> sampled;
  std::string answer;
  int prev = tokens.value().back();
  PromptStep step{false, "", {}};
  step.keep_going = [] { return g_interrupted == 0; };
  const int n = static_cast<int>(std::min<int64_t>(o.n, room + 1));
  auto st = Generate(c.session(), {}, n, sp, [&](int id) {
    const std::string piece = TokenText(e, prev, id);
    std::fputs(piece.c_str(), stdout);
    std::fflush(stdout);
    answer += piece;
    sampled.push_back(id);
    prev = id;
  }, step);
  std::fputs("\n", stdout);
  if (g_interrupted) std::printf("[stopped]\n");
  g_interrupted = 0;
  c.EndTurn(answer, sampled);
  if (!st.ok()) return st.error();
  if (!o.save.empty()) KVTRIM_RETURN_IF_ERROR(c.Save(o.save + "/conversation.kvc"));
  return {};
}

// The conversation of --save DIR when it holds one, else a new one.
Expected<std::unique_ptr<Conversation>> Open(const Engine& e, ChatOpts& o, const SessionOptions& so) {
  if (!o.save.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.save, ec);
    if (ec) return MakeError("--save '" + o.save + "': " + ec.message());
    const std::string file = o.save + "/conversation.kvc";
    if (std::filesystem::exists(file)) {
      if (o.kv.any_given())
        std::fprintf(stderr, "kvtrim chat: warning: the KV flags given are ignored: the saved conversation keeps "
                     "its own\n");
      auto c = Conversation::LoadFile(e, file, so);
      if (c.ok())
        std::printf("resumed %s: %d turns, %lld tokens\n", file.c_str(), c.value()->turns(),
                    static_cast<long long>(c.value()->session().position()));
      return c;
    }
  }
  return Conversation::Create(e, so);
}

int ChatAction(ChatOpts& o) {
  if (Status st = ApplyCacheTypes(&o.kv); !st.ok()) return Fail(st.message());
  for (const std::string& w : KvFlagWarnings(o.kv)) std::fprintf(stderr, "kvtrim chat: warning: %s\n", w.c_str());
  const KvOptions kv = ToKvOptions(o.kv, o.kv.kv.policy);
  std::unique_ptr<Engine> engine = LoadEngine("chat", o.model, o.threads, o.rope, o.ctx);
  if (!engine) return 1;
  SessionOptions so;
  so.ctx = o.ctx;
  so.kv = kv;
  auto conv = Open(*engine, o, so);
  if (!conv.ok()) return Fail(conv.error().message);
  Conversation& c = *conv.value();
  CatchInterrupt();
  std::printf("kvtrim chat: %s; /stats, /quit (or Ctrl-D); Ctrl-C stops an answer\n",
              c.session().kv_options().policy.c_str());
  std::string line;
  for (;;) {
    std::printf("> ");
    std::fflush(stdout);
    if (!std::getline(std::cin, line)) {
      if (g_interrupted) {  // Ctrl-C at the prompt (the read failed with EINTR): a new prompt
        g_interrupted = 0;
        std::cin.clear();
        std::clearerr(stdin);
        std::printf("\n");
        continue;
      }
      break;
    }
    if (line == "/quit" || line == "/exit") break;
    if (line == "/stats") {
      PrintStats(c);
      continue;
    }
    if (line.empty()) continue;
    if (Status st = Turn(*engine, c, o, line); !st.ok()) {
      std::fprintf(stderr, "kvtrim chat: %s\n", st.message().c_str());
      if (st.message().find("context length") == std::string::npos) return 1;
    }
  }
  std::printf("\n");
  return 0;
}

}  // namespace

Command AddChat(CLI::App& app) {
  auto o = std::make_shared<ChatOpts>();
  o->model = DefaultModelPath();
  CLI::App* sub = app.add_subcommand("chat", "An interactive conversation whose KV cache the policy holds to its "
                                             "budget; /stats, /quit; --save DIR to resume later");
  sub->add_option("-m,--model", o->model, "GGUF model file")->capture_default_str();
  sub->add_option("--system", o->system, "A system message before the first turn");
  sub->add_option("-n,--n-predict", o->n, "Tokens per answer at most")->capture_default_str()->check(NonNegative());
  sub->add_option("--save", o->save,
                  "Directory: the conversation is written there after every turn (conversation.kvc) and resumed "
                  "from it when it holds one");
  AddSamplingFlags(sub, &o->sampling);
  sub->add_option("-t,--threads", o->threads, "Threads (0: all cores)")->capture_default_str()->check(NonNegative());
  AddRopeFlags(sub, &o->rope);
  AddCtxFlag(sub, &o->ctx, "Context length (0: the model's): a conversation's positions grow with every token");
  UseServingDefaults(&o->kv);
  AddKvFlags(sub, &o->kv, true, false);
  AddCacheTypeFlags(sub, &o->kv);
  return {sub, [o]() { return ChatAction(*o); }};
}

}  // namespace kvtrim::cli
