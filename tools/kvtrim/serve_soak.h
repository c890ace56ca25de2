// `kvtrim serve-bench --soak-minutes M`: a bounded load held for M minutes
// against a running `kvtrim serve` (docs/server.md): each client creates a
// context, asks it questions, deletes it, and again; requests and errors by
// route and status, p50/p99 latency and the server's RSS per interval, and
// every context that answered 404 to its own creator (lost).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvtrim/status.h"

namespace kvtrim::cli {

struct SoakOpts {
  std::string host = "127.0.0.1";
  int port = 8080;
  double minutes = 20;
  int interval_s = 60;     // one row of the report per interval
  int clients = 2;
  int questions = 5;       // per context
  int max_tokens = 8;
  std::string kv = "snapkv";
  double ratio = 0.25;
};

// `texts`: the contexts' texts, used in turn. The report (JSON).
Expected<nlohmann::json> RunSoak(const SoakOpts& o, const std::vector<std::string>& texts);
// A Markdown rendering of it.
std::string SoakMarkdown(const nlohmann::json& rep);

}  // namespace kvtrim::cli
