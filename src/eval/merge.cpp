// Sample records on disk (samples.jsonl) and the merge of sharded sweeps
// (`kvtrim eval --shard i/n`, then `kvtrim eval-merge`).
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "kvtrim/eval_report.h"

namespace kvtrim::eval {
namespace {

using Json = nlohmann::ordered_json;

Json Num(double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); }
double Dbl(const Json& j) { return j.is_null() ? NAN : j.get<double>(); }

Json CountersJson(const std::vector<std::pair<std::string, double>>& c) {
  Json j = Json::object();
  for (const auto& [k, v] : c) j[k] = v;
  return j;
}

Json ToJson(const SampleRecord& s) {
  return {{"unit", s.unit},         {"task", s.task},           {"sample", s.sample},
          {"method", s.method},     {"ratio", s.ratio},         {"accuracy", Num(s.accuracy)},
          {"kl", Num(s.kl)},        {"nll_ratio", Num(s.nll_ratio)}, {"kv_bytes", Num(s.kv_bytes)},
          {"kv_bytes_full", Num(s.kv_bytes_full)}, {"kv_bytes_peak", Num(s.kv_bytes_peak)},
          {"compress_ms", Num(s.compress_ms)},
          {"entries_compressed", s.entries_compressed}, {"entries_end", s.entries_end},
          {"truncated", s.truncated}, {"note", s.note}, {"counters", CountersJson(s.counters)},
          {"chosen_ratio", Num(s.chosen_ratio)}, {"head_entries", s.head_entries},
          {"needle_kept", s.needle_kept}};
}

SampleRecord FromJson(const Json& j) {
  SampleRecord s;
  s.unit = j.at("unit").get<int>();
  s.task = j.at("task").get<std::string>();
  s.sample = j.at("sample").get<int>();
  s.method = j.at("method").get<std::string>();
  s.ratio = j.at("ratio").get<double>();
  s.accuracy = Dbl(j.at("accuracy"));
  s.kl = Dbl(j.at("kl"));
  s.nll_ratio = Dbl(j.at("nll_ratio"));
  s.kv_bytes = Dbl(j.at("kv_bytes"));
  s.kv_bytes_full = Dbl(j.at("kv_bytes_full"));
  if (j.contains("kv_bytes_peak")) s.kv_bytes_peak = Dbl(j.at("kv_bytes_peak"));  // older shards: absent
  s.compress_ms = Dbl(j.at("compress_ms"));
  s.entries_compressed = j.at("entries_compressed").get<long long>();
  s.entries_end = j.at("entries_end").get<long long>();
  s.truncated = j.at("truncated").get<bool>();
  s.note = j.at("note").get<std::string>();
  if (j.contains("chosen_ratio")) s.chosen_ratio = Dbl(j.at("chosen_ratio"));
  if (j.contains("head_entries")) s.head_entries = j.at("head_entries").get<std::vector<int>>();
  if (j.contains("needle_kept")) s.needle_kept = j.at("needle_kept").get<std::vector<double>>();
  if (j.contains("counters"))
    for (const auto& [k, v] : j.at("counters").items()) s.counters.emplace_back(k, v.get<double>());
  return s;
}

ReportMeta MetaFromJson(const Json& m) {
  ReportMeta r;
  r.model = m.at("model").get<std::string>();
  r.haystack = m.at("haystack").get<std::string>();
  r.mode = m.at("mode").get<std::string>();
  r.context_tokens = m.at("context_tokens").get<int>();
  r.samples = m.at("samples").get<int>();
  r.seed = m.at("seed").get<unsigned long long>();
  r.threads = m.at("threads").get<int>();
  r.elapsed_s = Dbl(m.at("elapsed_s"));
  r.clock_step_ns = m.value("clock_step_ns", int64_t{0});  // absent in reports written before it
  r.command = m.at("command").get<std::string>();
  r.notes = m.value("notes", std::vector<std::string>{});  // absent in reports written before them
  r.tasks = m.at("tasks").get<std::vector<std::string>>();
  r.methods = m.at("methods").get<std::vector<std::string>>();
  r.ratios = m.at("ratios").get<std::vector<double>>();
  r.shard = m.at("shard").get<std::string>();
  r.units_total = m.at("units_total").get<int>();
  r.units = m.at("units").get<std::vector<int>>();
  r.fingerprint = m.at("fingerprint").get<std::string>();
  r.max_context = m.at("max_context").get<std::string>();
  if (m.contains("quality_target")) r.quality_target = m.at("quality_target").get<double>();
  r.kv_storage = m.value("kv_storage", std::string());  // absent in reports written before it
  return r;
}

// The command without its --shard argument (the whole run's command).
std::string WithoutShard(const std::string& cmd) {
  size_t at = cmd.find(" --shard ");
  if (at == std::string::npos) return cmd;
  size_t end = cmd.find(' ', at + 9);
  return cmd.substr(0, at) + (end == std::string::npos ? "" : cmd.substr(end));
}

}  // namespace

Status WriteSamples(const Report& r, const std::string& path) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return MakeError("cannot open '" + path + "' for writing: " + std::strerror(errno));
  for (const SampleRecord& s : r.samples) f << ToJson(s).dump() << "\n";
  f.close();
  if (!f) return MakeError("failed writing '" + path + "'");
  return {};
}

Expected<Report> ReadReportDir(const std::string& dir) {
  Report rep;
  try {
    std::ifstream jf(dir + "/report.json", std::ios::binary);
    if (!jf) return MakeError("cannot open '" + dir + "/report.json'");
    rep.meta = MetaFromJson(Json::parse(jf).at("meta"));
    std::ifstream sf(dir + "/samples.jsonl", std::ios::binary);
    if (!sf) return MakeError("cannot open '" + dir + "/samples.jsonl'");
    std::string line;
    for (int n = 1; std::getline(sf, line); ++n) {
      if (line.empty()) continue;
      try {
        rep.samples.push_back(FromJson(Json::parse(line)));
      } catch (const Json::exception& e) {
        return MakeError(dir + "/samples.jsonl line " + std::to_string(n) + ": " + e.what());
      }
    }
  } catch (const Json::exception& e) {
    return MakeError(dir + "/report.json: not a kvtrim eval report (" + std::string(e.what()) + ")");
  }
  return rep;
}

Expected<Report> MergeReports(const std::vector<Report>& parts) {
  if (parts.empty()) return MakeError("no reports to merge");
  Report out;
  out.meta = parts.front().meta;
  std::set<int> seen;
  double elapsed = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const ReportMeta& m = parts[i].meta;
    const std::string which = "report " + std::to_string(i + 1) + " (shard " + (m.shard.empty() ? "whole" : m.shard) + ")";
    if (m.fingerprint != out.meta.fingerprint || m.model != out.meta.model)
      return MakeError(which + " comes from a sweep with other options or another model than the first");
    if (m.units_total != out.meta.units_total) return MakeError(which + " has another number of units");
    if (m.threads != out.meta.threads)
      return MakeError(which + " ran with " + std::to_string(m.threads) + " threads, the first with " +
                       std::to_string(out.meta.threads) + " (numbers would differ in the last bits)");
    for (int u : m.units)
      if (!seen.insert(u).second) return MakeError(which + " repeats unit " + std::to_string(u));
    out.samples.insert(out.samples.end(), parts[i].samples.begin(), parts[i].samples.end());
    elapsed += m.elapsed_s;
    out.meta.clock_step_ns = std::max(out.meta.clock_step_ns, m.clock_step_ns);
  }
  if (static_cast<int>(seen.size()) != out.meta.units_total)
    return MakeError("the reports hold " + std::to_string(seen.size()) + " of the sweep's " +
                     std::to_string(out.meta.units_total) + " units: a shard is missing");
  out.meta.shard.clear();
  out.meta.units.assign(seen.begin(), seen.end());
  out.meta.elapsed_s = elapsed;  // CPU-side sum over shards
  out.meta.command = WithoutShard(out.meta.command);
  out.cells = SummarizeCells(out.meta, out.samples);
  out.meta.task_file_notes = TaskFileNotes(out.meta, out.samples);
  return out;
}

}  // namespace kvtrim::eval
