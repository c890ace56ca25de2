// kvtrim: run Llama-family models on the CPU with a compressed KV cache.
#include <cstdio>
#include <filesystem>
#include <vector>

#include "commands.h"

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
  for (std::string base : {std::string("../shared"), std::string(KVTRIM_SOURCE_DIR) + "/../shared"}) {
    std::string p = base + "/data/frankenstein.txt";
    if (std::filesystem::exists(p)) return p;
  }
  return "../shared/data/frankenstein.txt";
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
      kvtrim::cli::AddInspect(app),
      kvtrim::cli::AddBench(app),
      kvtrim::cli::AddPolicies(app),
      kvtrim::cli::AddEval(app),
      kvtrim::cli::AddEvalMerge(app),
      kvtrim::cli::AddProfile(app),
      kvtrim::cli::AddCalibrate(app),
      kvtrim::cli::AddTokenize(app),
      kvtrim::cli::AddServe(app),
      kvtrim::cli::AddServeBench(app),
      kvtrim::cli::AddMakeModel(app),
      kvtrim::cli::AddContext(app),
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& c : cmds)
    if (c.sub->parsed()) return c.action();
  std::fprintf(stderr, "kvtrim: no subcommand given (see --help)\n");
  return 2;
}
