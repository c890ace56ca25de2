// llama.cpp's command-line habits, met before CLI11 parses: its multi-letter
// short flags (-ctk, -ctv) spelled as kvtrim's long ones, and the flags that
// mean nothing on this engine (-ngl, -fa, -b, -ub, --mlock, --no-mmap)
// taken out with their values and named, so that none is misread as
// another flag (CLI11 would read -ngl 99 as -n gl). And the nearest known
// flag for one that is not.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace kvtrim::cli {

struct LlamaArgs {
  std::vector<std::string> args;     // what CLI11 parses (args[0]: the program)
  std::vector<std::string> ignored;  // the flags taken out, each with its value ("-ngl 99")
};

// `app` tells which tokens are values of the chosen subcommand's options
// (`-p -fa` keeps its prompt "-fa").
LlamaArgs RewriteLlamaFlags(const CLI::App& app, const std::vector<std::string>& argv);

// For a CLI11 error naming arguments it did not expect: "unknown flag --X;
// did you mean --Y?" lines for those that look like flags (empty: none).
std::string SuggestFlags(CLI::App& app, const std::vector<std::string>& args, const std::string& error);

}  // namespace kvtrim::cli
