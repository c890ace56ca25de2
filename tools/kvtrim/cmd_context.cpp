// `kvtrim context inspect F`: what a context file (--save-context) holds:
// its header (model, tokenizer, RoPE, KV options), tokens, and entries and
// bytes per KV head. With --json the same as one JSON object.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <numeric>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "kvtrim/engine.h"

namespace kvtrim::cli {

Command AddContext(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("context", "Context files written by `kvtrim run --save-context` (docs/context-file.md)");
  sub->require_subcommand(1);
  CLI::App* inspect = sub->add_subcommand("inspect", "Print a context file's header, tokens and entries per KV head");
  auto path = std::make_shared<std::string>();
  auto as_json = std::make_shared<bool>(false);
  inspect->add_option("file", *path, "Context file")->required();
  inspect->add_flag("--json", *as_json, "One JSON object on stdout");
  auto action = [path, as_json]() -> int {
    auto info = InspectContextFile(*path);
    if (!info.ok()) {
      std::fprintf(stderr, "kvtrim context: %s\n", info.error().message.c_str());
      return 1;
    }
    const ContextFileInfo& i = info.value();
    const std::vector<int>& e = i.head_entries;
    const long long total = std::accumulate(e.begin(), e.end(), 0LL);
    if (*as_json) {
      nlohmann::json j = {{"file", *path}, {"file_bytes", i.file_bytes}, {"tokens", i.tokens},
                          {"row_bytes", i.row_bytes}, {"head_entries", e}, {"entries", total},
                          {"header", nlohmann::json::parse(i.header)}};
      std::printf("%s\n", j.dump(2).c_str());
      return 0;
    }
    std::printf("file: %s (%zu bytes)\n%s\n", path->c_str(), i.file_bytes, i.header.c_str());
    std::printf("tokens: %lld; KV heads: %zu; entries: %lld (per head min %d, max %d); %zu bytes per key or value row; "
                "%lld bytes of keys and values\n",
                static_cast<long long>(i.tokens), e.size(), total, e.empty() ? 0 : *std::min_element(e.begin(), e.end()),
                e.empty() ? 0 : *std::max_element(e.begin(), e.end()), i.row_bytes,
                total * 2 * static_cast<long long>(i.row_bytes));
    return 0;
  };
  return {inspect, action};
}

}  // namespace kvtrim::cli
