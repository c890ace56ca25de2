// Sample records -> report cells: mean and standard error per (task, method,
// ratio), summed in unit order so sharded and whole runs agree bit for bit.
#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "eval/metrics.h"
#include "kvtrim/eval_paired.h"
#include "kvtrim/eval_report.h"
#include "kvtrim/eval_tasks.h"
#include "kvtrim/clock.h"

namespace kvtrim::eval {
namespace {

double SumOf(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}

// The step of the clock that timed the samples; this machine's when the
// report does not say (reports written before it did).
double StepNs(const ReportMeta& m) {
  return static_cast<double>(m.clock_step_ns > 0 ? m.clock_step_ns : SteadyClock().step_ns);
}

// Retention of a needle cell against the full cache's samples of its task,
// paired by sample index (samples without numbers on either side left out).
void SetRetention(const std::vector<const SampleRecord*>& full, const std::vector<const SampleRecord*>& method,
                  Cell* c) {
  std::map<int, bool> answered;
  for (const SampleRecord* s : full)
    if (Scored(*s)) answered[s->sample] = Answered(*s);
  std::vector<bool> f, m;
  for (const SampleRecord* s : method) {
    auto it = answered.find(s->sample);
    if (!Scored(*s) || it == answered.end()) continue;
    f.push_back(it->second), m.push_back(Answered(*s));
  }
  if (f.empty()) return;
  const Expected<Retention> r = RetentionOf(f, m);  // sizes agree by construction
  if (!r.ok() || r->full_right == 0) return;
  c->retention_n = r->full_right;
  c->retention = r->value, c->retention_lo = r->ci.lo, c->retention_hi = r->ci.hi;
}

}  // namespace

std::vector<Cell> SummarizeCells(const ReportMeta& meta, std::vector<SampleRecord> samples) {
  std::stable_sort(samples.begin(), samples.end(),
                   [](const SampleRecord& a, const SampleRecord& b) { return a.unit < b.unit; });
  using Key = std::tuple<std::string, std::string, double>;
  std::map<Key, std::vector<const SampleRecord*>> by;
  for (const SampleRecord& s : samples) by[{s.task, s.method, s.ratio}].push_back(&s);
  std::vector<Cell> out;
  for (const std::string& task : meta.tasks)
    for (const std::string& method : meta.methods) {
      const std::vector<double> ratios = method == "full" ? std::vector<double>{1.0} : meta.ratios;
      for (double r : ratios) {
        auto it = by.find({task, method, r});
        if (it == by.end()) continue;
        std::vector<double> acc, kl, nr, bytes, full, ms, chosen, quality, peak;
        std::string note;
        int noted = 0;
        std::vector<std::pair<std::string, double>> counters;  // summed, in first-seen order
        std::vector<double> heads;                             // summed per KV head
        std::vector<double> kept;                              // needle_kept, summed per KV head
        int kept_n = 0;
        for (const SampleRecord* s : it->second) {
          if (!s->note.empty()) {
            if (note.empty()) note = s->note;
            ++noted;
            continue;
          }
          acc.push_back(s->accuracy), kl.push_back(s->kl), nr.push_back(s->nll_ratio);
          bytes.push_back(s->kv_bytes), full.push_back(s->kv_bytes_full), ms.push_back(s->compress_ms);
          if (!std::isnan(s->kv_bytes_peak)) peak.push_back(s->kv_bytes_peak);
          if (!std::isnan(s->chosen_ratio)) {
            chosen.push_back(s->chosen_ratio);
            quality.push_back(s->nll_ratio > 0 ? 1.0 / s->nll_ratio : NAN);
          }
          if (heads.size() < s->head_entries.size()) heads.resize(s->head_entries.size(), 0.0);
          for (size_t h = 0; h < s->head_entries.size(); ++h) heads[h] += s->head_entries[h];
          if (!s->needle_kept.empty()) {
            if (kept.size() < s->needle_kept.size()) kept.resize(s->needle_kept.size(), 0.0);
            for (size_t h = 0; h < s->needle_kept.size(); ++h) kept[h] += s->needle_kept[h];
            ++kept_n;
          }
          for (const auto& [name, v] : s->counters) {
            auto at = std::find_if(counters.begin(), counters.end(), [&](const auto& c) { return c.first == name; });
            if (at == counters.end()) counters.emplace_back(name, v);
            else at->second += v;
          }
        }
        Cell c;
        c.task = task, c.method = method, c.ratio = r;
        c.n = static_cast<int>(kl.size());
        const MeanSe a = Summarize(acc), k = Summarize(kl), n = Summarize(nr);
        c.accuracy = a.n ? a.mean : NAN, c.accuracy_se = a.n ? a.se : NAN;
        c.kl = k.n ? k.mean : NAN, c.kl_se = k.n ? k.se : NAN;
        c.nll_ratio = n.n ? n.mean : NAN, c.nll_ratio_se = n.n ? n.se : NAN;
        c.kv_bytes = c.n ? Summarize(bytes).mean : NAN;
        c.kv_bytes_full = c.n ? Summarize(full).mean : NAN;
        c.kv_bytes_peak = peak.empty() ? NAN : Summarize(peak).mean;
        c.compress_ms = c.n ? Summarize(ms).mean : NAN;
        c.compress_below_res = c.n > 0 && SumOf(ms) * 1e6 < kMinClockSteps * StepNs(meta);
        if (noted > 0 && c.n > 0)
          note += " (" + std::to_string(noted) + " of " + std::to_string(noted + c.n) + " samples)";
        c.note = note;
        for (auto& [name, v] : counters) c.counters.emplace_back(name, v / c.n);
        for (double v : heads) c.head_entries.push_back(v / c.n);
        for (double v : kept) c.needle_kept.push_back(v / kept_n);
        if (!c.needle_kept.empty())
          c.needle_kept_mean = SumOf(c.needle_kept) / static_cast<double>(c.needle_kept.size());
        if (!chosen.empty()) {
          const MeanSe ch = Summarize(chosen), q = Summarize(quality);
          c.chosen_ratio = ch.mean;
          c.chosen_min = *std::min_element(chosen.begin(), chosen.end());
          c.chosen_max = *std::max_element(chosen.begin(), chosen.end());
          c.quality = q.mean, c.quality_se = q.se;
          for (double y : quality) c.below_target += y < meta.quality_target;
        }
        if (auto f = by.find({task, "full", 1.0}); f != by.end()) SetRetention(f->second, it->second, &c);
        out.push_back(std::move(c));
      }
    }
  return out;
}

std::vector<std::string> TaskFileNotes(const ReportMeta& meta, const std::vector<SampleRecord>& samples) {
  std::vector<std::string> out;
  for (const std::string& task : meta.tasks) {
    if (ParseTask(task).ok() || task == "fidelity" || task == "fidelity-decode") continue;
    int n = 0, truncated = 0, skipped = 0;
    for (const SampleRecord& s : samples) {
      if (s.task != task || s.method != "full") continue;
      ++n;
      truncated += s.truncated;
      skipped += s.note.rfind("skipped", 0) == 0;
    }
    out.push_back(task + ": " + std::to_string(n) + " samples; longer than " + std::to_string(meta.context_tokens) +
                  " tokens: " + std::to_string(truncated) + " truncated in the middle, " + std::to_string(skipped) +
                  " skipped (--max-context " + meta.max_context + ")");
  }
  return out;
}

}  // namespace kvtrim::eval
