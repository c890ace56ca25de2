// `kvtrim serve-bench`: a load generator for a running `kvtrim serve`
// (docs/server.md): (1) questions about one context, stored compressed once
// vs re-prefilled with every question, per ratio; (2) a bounded concurrent
// load (clients x requests) with throughput, p50/p99 latency and the
// server's peak RSS from /metrics.
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "checks.h"
#include "commands.h"
#include "kvtrim/clock.h"
#include "kvtrim/engine.h"
#include "kvtrim/prompt.h"
#include "serve_soak.h"

namespace kvtrim::cli {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// The wall clock's step, and which of `fields` (ms) span fewer than
// kMinClockSteps of its steps (io/clock.h: 20 ms steps on some machines).
void MarkTimings(json& row, const std::vector<std::string>& fields) {
  json below = json::array();
  for (const auto& f : fields)
    if (row.contains(f) && row[f].is_number() && BelowResolutionMs(row[f].get<double>())) below.push_back(f);
  row["clock_step_ms"] = SteadyClock().step_ns * 1e-6;
  row["below_clock_resolution"] = below;
}

struct BenchOpts {
  std::string model, host = "127.0.0.1", haystack, kv = "snapkv", out;
  int port = 8080, context_tokens = 1000, questions = 20, max_tokens = 8, clients = 8, requests = 10;
  std::vector<double> ratios = {0.5, 0.25};
  double soak_minutes = 0;
  int soak_interval_s = 60;
};

// POSTs `body`; the parsed reply, or an error naming the status.
Expected<json> Post(httplib::Client& c, const std::string& path, const json& body) {
  auto r = c.Post(path.c_str(), body.dump(), "application/json");
  if (!r) return MakeError("POST " + path + ": " + httplib::to_string(r.error()));
  if (r->status != 200) return MakeError("POST " + path + ": HTTP " + std::to_string(r->status) + " " + r->body);
  return json::parse(r->body);
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = static_cast<size_t>(std::min<double>(v.size() - 1, std::ceil(q * v.size()) - 1));
  return v[i];
}

// `n` tokens of the haystack from character `from`, as text.
Expected<std::string> ContextText(const BenchOpts& o, size_t from = 0) {
  auto e = Engine::Load({o.model, 1});
  if (!e.ok()) return e.error();
  std::ifstream f(o.haystack);
  if (!f) return MakeError("cannot read haystack " + o.haystack);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string all = ss.str();
  if (from >= all.size()) from = 0;
  std::string text = all.substr(from, static_cast<size_t>(o.context_tokens) * 8);
  PromptRequest plain;  // the text as it is, no BOS
  plain.text = text;
  plain.continues = true;
  std::vector<int> ids = EncodePrompt(*e.value(), plain).ids;
  ids.resize(std::min<size_t>(ids.size(), static_cast<size_t>(o.context_tokens - 1)));  // BOS is the last one
  return DecodeTokens(*e.value(), ids);
}

std::string Question(int i) {
  return "\n\nQuestion " + std::to_string(i + 1) + ": what does the text above say about the voyage?\nAnswer:";
}

// Phase 1: one context, `questions` greedy questions, stored vs re-prefilled.
Expected<json> StoredVsReprefill(httplib::Client& c, const BenchOpts& o, const std::string& text, double ratio,
                                 const std::string& kv) {
  json kvf{{"kv", kv}};
  if (kv != "full") kvf["kv_ratio"] = ratio;
  json row{{"kv", kv}, {"ratio", kv == "full" ? 1.0 : ratio}, {"questions", o.questions}};
  auto t0 = Clock::now();
  json ctx_req = kvf;
  ctx_req["text"] = text;
  auto ctx = Post(c, "/v1/contexts", ctx_req);
  if (!ctx.ok()) return ctx.error();
  const std::string id = (*ctx)["id"];
  row["context_tokens"] = (*ctx)["tokens"];
  row["context_kv_bytes"] = (*ctx)["kv_bytes"];
  row["context_kv_bytes_full"] = (*ctx)["kv_bytes_full"];
  row["compress_ms"] = (*ctx)["compress_ms"];
  for (int i = 0; i < o.questions; ++i) {
    auto r = Post(c, "/v1/completions",
                  {{"context_id", id}, {"prompt", Question(i)}, {"max_tokens", o.max_tokens}, {"temperature", 0}});
    if (!r.ok()) return r.error();
  }
  row["stored_ms"] = MsSince(t0);
  c.Delete(("/v1/contexts/" + id).c_str());
  t0 = Clock::now();
  for (int i = 0; i < o.questions; ++i) {
    json q = kvf;
    q["prompt"] = text + Question(i);
    q["max_tokens"] = o.max_tokens;
    q["temperature"] = 0;
    auto r = Post(c, "/v1/completions", q);
    if (!r.ok()) return r.error();
  }
  row["reprefill_ms"] = MsSince(t0);
  const double stored = row["stored_ms"].get<double>();
  row["speedup"] = stored > 0 ? json(row["reprefill_ms"].get<double>() / stored) : json(nullptr);
  MarkTimings(row, {"compress_ms", "stored_ms", "reprefill_ms"});
  return row;
}

// Phase 2: `clients` threads x `requests` questions against one stored context.
Expected<json> Load(const BenchOpts& o, const std::string& text, double ratio) {
  httplib::Client c(o.host, o.port);
  c.set_read_timeout(600, 0);
  auto ctx = Post(c, "/v1/contexts", {{"text", text}, {"kv", o.kv}, {"kv_ratio", ratio}});
  if (!ctx.ok()) return ctx.error();
  const std::string id = (*ctx)["id"];
  std::mutex mu;
  std::vector<double> lat;
  int ok = 0, busy = 0, failed = 0;
  int64_t tokens = 0;
  auto t0 = Clock::now();
  std::vector<std::thread> th;
  for (int k = 0; k < o.clients; ++k)
    th.emplace_back([&, k] {
      httplib::Client cc(o.host, o.port);
      cc.set_read_timeout(600, 0);
      for (int i = 0; i < o.requests; ++i) {
        json q{{"context_id", id}, {"prompt", Question(k * o.requests + i)}, {"max_tokens", o.max_tokens},
               {"temperature", 0.8}, {"seed", k * 1000 + i}};
        auto t = Clock::now();
        auto r = cc.Post("/v1/completions", q.dump(), "application/json");
        const double ms = MsSince(t);
        std::lock_guard<std::mutex> lk(mu);
        if (r && r->status == 200) {
          ++ok;
          lat.push_back(ms);
          tokens += json::parse(r->body)["usage"]["completion_tokens"].get<int64_t>();
        } else if (r && r->status == 503) {
          ++busy;
        } else {
          ++failed;
        }
      }
    });
  for (auto& t : th) t.join();
  const double wall = MsSince(t0);
  c.Delete(("/v1/contexts/" + id).c_str());
  json out{{"clients", o.clients}, {"requests_per_client", o.requests}, {"kv", o.kv}, {"ratio", ratio},
           {"ok", ok}, {"rejected_503", busy}, {"failed", failed}, {"wall_ms", wall},
           {"requests_per_s", RatePerSecond(ok, wall * 1e6).value_or(0)},
           {"completion_tokens_per_s", RatePerSecond(static_cast<double>(tokens), wall * 1e6).value_or(0)},
           {"p50_ms", Percentile(lat, 0.5)}, {"p99_ms", Percentile(lat, 0.99)},
           {"max_ms", lat.empty() ? 0.0 : *std::max_element(lat.begin(), lat.end())}};
  MarkTimings(out, {"wall_ms", "p50_ms", "p99_ms", "max_ms"});
  return out;
}

double MetricValue(const std::string& text, const std::string& name) {
  std::istringstream is(text);
  std::string line;
  while (std::getline(is, line))
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  return 0;
}

std::string Fmt(double v, int prec) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", prec, v);
  return b;
}

void WriteReport(const BenchOpts& o, const json& rep) {
  std::printf("%s\n", rep.dump(2).c_str());
  if (o.out.empty()) return;
  std::filesystem::create_directories(o.out);
  std::ofstream(o.out + "/serve-bench.json") << rep.dump(2) << "\n";
  std::ofstream md(o.out + "/serve-bench.md");
  md << "| kv | ratio | context tokens | context KV bytes | stored: ms for " << o.questions
     << " questions (compress included) | re-prefill: ms | speedup |\n|---|---|---|---|---|---|---|\n";
  for (const auto& r : rep["questions"])
    md << "| " << r["kv"].get<std::string>() << " | " << r["ratio"].get<double>() << " | " << r["context_tokens"]
       << " | " << r["context_kv_bytes"] << " | " << Fmt(r["stored_ms"], 0) << " | " << Fmt(r["reprefill_ms"], 0)
       << " | " << (r["speedup"].is_number() ? Fmt(r["speedup"], 2) : std::string("-")) << " |\n";
  const json& l = rep["load"];
  md << "\n| clients x requests | ok | 503 | req/s | tokens/s | p50 ms | p99 ms | server peak RSS MiB (after questions, after load) |\n"
     << "|---|---|---|---|---|---|---|---|\n| " << l["clients"] << " x " << l["requests_per_client"] << " | " << l["ok"]
     << " | " << l["rejected_503"] << " | " << Fmt(l["requests_per_s"], 2) << " | "
     << Fmt(l["completion_tokens_per_s"], 1) << " | " << Fmt(l["p50_ms"], 0) << " | " << Fmt(l["p99_ms"], 0) << " | "
     << Fmt(rep["server_peak_rss_bytes_after_questions"].get<double>() / 1048576.0, 1) << ", "
     << Fmt(rep["server_peak_rss_bytes"].get<double>() / 1048576.0, 1) << " |\n";
}

int SoakAction(const BenchOpts& o) {
  std::vector<std::string> texts;
  for (size_t from : {0, 60000, 120000, 180000, 240000, 300000, 360000, 420000}) {
    auto t = ContextText(o, from);
    if (!t.ok()) {
      std::fprintf(stderr, "kvtrim serve-bench: %s\n", t.error().message.c_str());
      return 1;
    }
    texts.push_back(t.value());
  }
  SoakOpts so;
  so.host = o.host, so.port = o.port, so.minutes = o.soak_minutes, so.interval_s = o.soak_interval_s;
  so.clients = o.clients, so.questions = o.questions, so.max_tokens = o.max_tokens, so.kv = o.kv;
  so.ratio = o.ratios.empty() ? 1.0 : o.ratios.front();
  std::fprintf(stderr, "kvtrim serve-bench: soak for %.1f min, %d clients\n", so.minutes, so.clients);
  auto rep = RunSoak(so, texts);
  if (!rep.ok()) {
    std::fprintf(stderr, "kvtrim serve-bench: %s\n", rep.error().message.c_str());
    return 1;
  }
  rep.value()["command"] = Argv();
  std::printf("%s\n", rep.value().dump(2).c_str());
  if (!o.out.empty()) {
    std::filesystem::create_directories(o.out);
    std::ofstream(o.out + "/soak.json") << rep.value().dump(2) << "\n";
    std::ofstream(o.out + "/soak.md") << SoakMarkdown(rep.value());
  }
  return rep.value()["contexts_lost"].get<int64_t>() == 0 ? 0 : 1;
}

}  // namespace

Command AddServeBench(CLI::App& app) {
  auto o = std::make_shared<BenchOpts>();
  o->model = DefaultModelPath();
  o->haystack = DefaultHaystackPath();
  CLI::App* sub = app.add_subcommand("serve-bench", "Load generator for a running `kvtrim serve` (docs/server.md)");
  sub->add_option("--host", o->host, "Server address")->capture_default_str();
  sub->add_option("--port", o->port, "Server port")->capture_default_str();
  sub->add_option("-m,--model", o->model, "The served model (its tokenizer cuts the context)")->capture_default_str();
  sub->add_option("--haystack", o->haystack, kHaystackHelp)->capture_default_str()->transform(HaystackName());
  sub->add_option("--context-tokens", o->context_tokens, "Context length in tokens")->capture_default_str();
  sub->add_option("--questions", o->questions, "Questions per context (0: the load phase only)")->capture_default_str();
  sub->add_option("--max-tokens", o->max_tokens, "Tokens generated per answer")->capture_default_str();
  sub->add_option("--kv", o->kv, "Policy of the compressed contexts")->capture_default_str();
  sub->add_option("--ratios", o->ratios, "Retention ratios compared (and `full`)")->delimiter(',')->capture_default_str();
  sub->add_option("--clients", o->clients, "Concurrent clients of the load phase")->capture_default_str();
  sub->add_option("--requests", o->requests, "Requests per client")->capture_default_str();
  sub->add_option("--out", o->out, "Folder for serve-bench.json and serve-bench.md");
  sub->add_option("--soak-minutes", o->soak_minutes,
                  "Only a soak: --clients clients create a context, ask --questions, delete it, for this long "
                  "(soak.json, soak.md in --out)")
      ->check(NonNegative());
  sub->add_option("--soak-interval-s", o->soak_interval_s, "One row of the soak report per this many seconds")
      ->capture_default_str()
      ->check(Positive());
  auto action = [o]() -> int {
    if (o->soak_minutes > 0) return SoakAction(*o);
    auto text = ContextText(*o);
    if (!text.ok()) {
      std::fprintf(stderr, "kvtrim serve-bench: %s\n", text.error().message.c_str());
      return 1;
    }
    httplib::Client c(o->host, o->port);
    c.set_read_timeout(600, 0);
    json rep{{"questions", json::array()}};
    std::vector<std::pair<std::string, double>> cells = {{"full", 1.0}};
    for (double r : o->ratios) cells.emplace_back(o->kv, r);
    if (o->questions == 0) cells.clear();  // the load phase only
    for (const auto& [kv, r] : cells) {
      auto row = StoredVsReprefill(c, *o, text.value(), r, kv);
      if (!row.ok()) {
        std::fprintf(stderr, "kvtrim serve-bench: %s\n", row.error().message.c_str());
        return 1;
      }
      rep["questions"].push_back(row.value());
    }
    auto peak = [&] {
      auto m = c.Get("/metrics");
      return m ? MetricValue(m->body, "kvtrim_peak_resident_memory_bytes") : 0.0;
    };
    rep["server_peak_rss_bytes_after_questions"] = peak();
    auto load = Load(*o, text.value(), o->ratios.empty() ? 1.0 : o->ratios.front());
    if (!load.ok()) {
      std::fprintf(stderr, "kvtrim serve-bench: %s\n", load.error().message.c_str());
      return 1;
    }
    rep["load"] = load.value();
    rep["server_peak_rss_bytes"] = peak();
    rep["command"] = Argv();
    WriteReport(*o, rep);
    return 0;
  };
  return {sub, action};
}

}  // namespace kvtrim::cli
