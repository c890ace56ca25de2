// Subcommands of the kvtrim CLI: each declares its flags once (CLI11 builds
// the help text from them) and returns the action to run when chosen.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kvtrim::cli {

struct Command {
  CLI::App* sub;
  std::function<int()> action;  // returns the process exit code
};

// Model path used when -m is not given.
std::string DefaultModelPath();
// Haystack used when --haystack is not given: data/haystacks/devils-dictionary.txt
// (shipped; a text the default model never read) in the working directory or
// the source tree.
std::string DefaultHaystackPath();
// A --haystack value: a file, or a name: devils-dictionary (the default),
// frankenstein or kjv (../shared/data, the default model's training text).
std::string HaystackPath(const std::string& v);
// The --haystack options' transform (a name becomes its file).
CLI::Validator HaystackName();
inline constexpr const char* kHaystackHelp =
    "Haystack text file (UTF-8), or a name: devils-dictionary (shipped, never read by the default model), "
    "frankenstein or kjv (../shared/data: the default model's training text)";
// The process's arguments (set by main), for reports that record their command.
const std::vector<std::string>& Argv();
void SetArgv(int argc, char** argv);

Command AddRun(CLI::App& app);
Command AddChat(CLI::App& app);
Command AddInspect(CLI::App& app);
Command AddBench(CLI::App& app);
Command AddPolicies(CLI::App& app);
Command AddEval(CLI::App& app);
Command AddEvalMerge(CLI::App& app);
Command AddEvalCompare(CLI::App& app);
Command AddProfile(CLI::App& app);
Command AddCalibrate(CLI::App& app);
Command AddTokenize(CLI::App& app);
Command AddServe(CLI::App& app);
Command AddServeBench(CLI::App& app);
Command AddMakeModel(CLI::App& app);
Command AddContext(CLI::App& app);

}  // namespace kvtrim::cli
