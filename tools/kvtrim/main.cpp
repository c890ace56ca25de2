// kvtrim: run Llama-family models on the CPU with a compressed KV cache.
#include <cstdio>
#include <filesystem>
#include <vector>

#include "commands.h"
#include "kvtrim/allocator.h"
#include "llama_flags.h"

#ifndef KVTRIM_SOURCE_DIR
#define KVTRIM_SOURCE_DIR "."
#endif

namespace kvtrim::cli {

std::string DefaultModelPath() {
  const char* rel = "models/needle-v1-3.7M-f32.gguf";
  if (std::filesystem::exists(rel)) return rel;
  return std::string(KVTRIM_SOURCE_DIR) + "/" + rel;
}

std::string DefaultHaystackPath() {
  const char* rel = "data/haystacks/devils-dictionary.txt";
  if (std::filesystem::exists(rel)) return rel;
  return std::string(KVTRIM_SOURCE_DIR) + "/" + rel;
}

std::string HaystackPath(const std::string& v) {
  if (v.find('/') != std::string::npos || std::filesystem::exists(v)) return v;
  if (v == "devils-dictionary") return DefaultHaystackPath();
  if (v == "frankenstein" || v == "kjv") {
    for (std::string base : {std::string("../shared"), std::string(KVTRIM_SOURCE_DIR) + "/../shared"}) {
      std::string p = base + "/data/" + v + ".txt";
      if (std::filesystem::exists(p)) return p;
    }
    return "../shared/data/" + v + ".txt";  // missing: the read names where it looked
  }
  return v;  // not a name: a file that does not exist, refused where it is read
}

CLI::Validator HaystackName() {
  return CLI::Validator(
      [](std::string& v) {
        v = HaystackPath(v);
        return std::string();
      },
      "FILE|NAME");
}

namespace {
std::vector<std::string>& ArgvStore() {
  static std::vector<std::string> a;
  return a;
}
}  // namespace

const std::vector<std::string>& Argv() { return ArgvStore(); }
void SetArgv(int argc, char** argv) { ArgvStore().assign(argv, argv + argc); }

}  // namespace kvtrim::cli

int main(int argc, char** argv) {
  kvtrim::cli::SetArgv(argc, argv);
  CLI::App app{"kvtrim: Llama-family inference on the CPU with a compressed KV cache"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kvtrim 0.1.0");
  std::vector<kvtrim::cli::Command> cmds = {
      kvtrim::cli::AddRun(app),
      kvtrim::cli::AddChat(app),
      kvtrim::cli::AddInspect(app),
      kvtrim::cli::AddBench(app),
      kvtrim::cli::AddPolicies(app),
      kvtrim::cli::AddEval(app),
      kvtrim::cli::AddEvalMerge(app),
      kvtrim::cli::AddEvalCompare(app),
      kvtrim::cli::AddProfile(app),
      kvtrim::cli::AddCalibrate(app),
      kvtrim::cli::AddTokenize(app),
      kvtrim::cli::AddServe(app),
      kvtrim::cli::AddServeBench(app),
      kvtrim::cli::AddMakeModel(app),
      kvtrim::cli::AddContext(app),
  };
  const kvtrim::cli::LlamaArgs la = kvtrim::cli::RewriteLlamaFlags(app, {argv, argv + argc});
  std::vector<char*> args;
  for (const std::string& a : la.args) args.push_back(const_cast<char*>(a.c_str()));
  if (!la.ignored.empty()) {
    std::string names;
    for (const std::string& f : la.ignored) names += " " + f;
    std::fprintf(stderr, "kvtrim: ignored (llama.cpp flags with no meaning on this CPU engine):%s\n", names.c_str());
  }
  try {
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::ParseError& e) {
    const std::string hint = kvtrim::cli::SuggestFlags(app, la.args, e.what());
    if (hint.empty()) return app.exit(e);
    std::fputs(hint.c_str(), stderr);
    std::fprintf(stderr, "Run with --help for more information.\n");
    return static_cast<int>(e.get_exit_code());
  }
  // Freed buffers kept for reuse (kvtrim/allocator.h); not by the server,
  // whose memory is bounded per arena instead (cmd_serve.cpp, M_ARENA_MAX):
  // a long-lived process would keep up to 256 MiB of freed heap an arena.
  if (!app.got_subcommand("serve")) kvtrim::TuneAllocator();
  for (auto& c : cmds)
    if (c.sub->parsed()) return c.action();
  std::fprintf(stderr, "kvtrim: no subcommand given (see --help)\n");
  return 2;
}
