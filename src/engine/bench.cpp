#include "kvtrim/bench.h"

#include "engine/engine_impl.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <cmath>
#include <optional>
#include <random>

#include "kvtrim/bench_repeat.h"
#include "io/tokenizer.h"
#include "engine/bench_membw.h"
#include "kv/cache.h"
#include "kv/compressor.h"
#include "model/config.h"
#include "model/weights.h"

namespace kvtrim {
namespace {

using Chrono = std::chrono::steady_clock;
constexpr int kProbeReps = 3;  // best of 3 reads beside a row's decode (each spans the clock's minimum steps)
double Since(Chrono::time_point t) { return std::chrono::duration<double>(Chrono::now() - t).count(); }

// Bytes of K and V rows a decode step reads: every entry of every head.
double KvRowBytes(const kv::KvCache& c) {
  double s = 0;
  for (int l = 0; l < c.n_layer(); ++l)
    for (int h = 0; h < c.n_head_kv(); ++h) s += 2.0 * c.head(l, h).size() * c.head(l, h).row_bytes();
  return s;
}

// The bytes a matrix product reads: its repack where it has one (f32
// scales, rows padded to 16: 151 MB on SmolLM2-135M's Q8_0 against 143 MB
// in the file), else its stored rows.
double ProductBytes(const kernels::WeightView& m) {
  return static_cast<double>(m.packed ? m.packed->bytes() : m.bytes());
}

// Weight bytes read per decoded token: every matrix once (the embedding
// table only through its output use when tied, one row otherwise).
double WeightBytesPerToken(const Engine& e) {
  const auto& w = e.impl().weights();
  double s = ProductBytes(w.output) + w.output_norm.size() * 4.0;
  if (w.tok_embd.data != w.output.data) s += static_cast<double>(w.tok_embd.row_bytes());
  for (const auto& L : w.layers) {
    for (const auto* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) s += ProductBytes(*m);
    s += (L.attn_norm.size() + L.ffn_norm.size() + L.bq.size() + L.bk.size() + L.bv.size()) * 4.0;
  }
  return s;
}

}  // namespace

size_t PeakRssBytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      std::istringstream is(line.substr(6));
      size_t kb = 0;
      is >> kb;
      return kb * 1024;
    }
  }
  return 0;
}

Stat MeanSd(const std::vector<double>& xs) {
  Stat s;
  if (xs.empty()) return s;
  for (double x : xs) s.mean += x;
  s.mean /= xs.size();
  if (xs.size() > 1) {
    double v = 0;
    for (double x : xs) v += (x - s.mean) * (x - s.mean);
    s.sd = std::sqrt(v / (xs.size() - 1));
  }
  return s;
}

namespace {

// Adds a repetition's counters (after its decode steps) and their growth
// over the decode steps to the row.
void AddCounters(BenchRow* row, const std::vector<std::pair<std::string, int64_t>>& before,
                 const std::vector<std::pair<std::string, int64_t>>& after) {
  if (row->counters.empty()) {
    for (const auto& [name, v] : after) {
      row->counters.push_back({name, 0});
      row->decode_counters.push_back({name, 0});
    }
  }
  for (size_t i = 0; i < after.size() && i < row->counters.size(); ++i) {
    row->counters[i].second += after[i].second;
    row->decode_counters[i].second += after[i].second - (i < before.size() ? before[i].second : 0);
  }
}

// What the repetitions of one depth measured besides the timed sections.
struct DepthSamples {
  std::vector<double> pf, dc, kv_read, comp_ms, chunk_ms, evict_us, entries, ratios, first_ms, membw;
  double comp_total_ns = 0;  // every session's prefill-time compression, summed
};

// A batch of k repetitions at one depth: k sessions, each prefilled (one
// timed span for all k), compressed (untimed; the Compressor times it), and
// decoding o.gen tokens (one timed span for all k). The per-session figures
// go to `d`; the counters of the first session to `row` (summed over the
// repetitions, as before batches). With a probe, the read bandwidth just
// before and just after the timed decode steps goes to d->membw.
Expected<BatchTiming> BenchBatch(const Engine& e, const BenchOptions& o, int prefill_len, std::mt19937_64& rng,
                                 const Clock& clock, int k, ReadProbe* probe, DepthSamples* d, BenchRow* row) {
  const int vocab = e.impl().config().vocab;
  std::vector<std::unique_ptr<Session>> ses;
  std::vector<std::vector<int>> toks;
  for (int i = 0; i < k; ++i) {
    auto s = Session::Create(e, o.session);
    if (!s.ok()) return s.error();
    if (prefill_len + o.gen + 1 > s.value()->ctx()) {
      return MakeError("depth " + std::to_string(prefill_len) + " + " + std::to_string(o.gen + 1) +
                       " generated tokens (one untimed) exceeds the context length " +
                       std::to_string(s.value()->ctx()));
    }
    std::vector<int> t(prefill_len);
    t[0] = e.impl().tokenizer().start();
    for (size_t j = 1; j < t.size(); ++j) t[j] = static_cast<int>(3 + rng() % (vocab - 3));
    toks.push_back(std::move(t));
    ses.push_back(std::move(s.value()));
  }
  BatchTiming b;
  Stopwatch sw_pf(clock);
  for (int i = 0; i < k; ++i) KVTRIM_RETURN_IF_ERROR(ses[i]->Prefill(toks[i]));
  b.spans_ns.push_back(sw_pf.Elapsed().ns);
  for (int i = 0; i < k; ++i) d->chunk_ms.push_back(ses[i]->impl().compressor().compress_seconds() * 1e3);  // between chunks
  std::vector<double> comp_before(k);
  std::vector<std::vector<std::pair<std::string, int64_t>>> counters_before(k);
  for (int i = 0; i < k; ++i) {
    KVTRIM_RETURN_IF_ERROR(ses[i]->Compress());
    d->comp_ms.push_back(ses[i]->impl().compressor().compress_seconds() * 1e3);
    d->comp_total_ns += ses[i]->impl().compressor().compress_seconds() * 1e9;
    d->ratios.push_back(ses[i]->chosen_ratio());
    comp_before[i] = ses[i]->impl().compressor().compress_seconds();
    counters_before[i] = ses[i]->impl().compressor().counters();
  }
  std::vector<int> next(static_cast<size_t>(k) * o.gen);
  for (int& x : next) x = static_cast<int>(3 + rng() % (vocab - 3));
  for (int i = 0; i < k; ++i) {  // BenchRow::first_decode_ms: the storage grows here
    Stopwatch sw_first(clock);
    KVTRIM_RETURN_IF_ERROR(ses[i]->Decode(next[static_cast<size_t>(i) * o.gen]));
    d->first_ms.push_back(static_cast<double>(sw_first.Elapsed().ns) / 1e6);
  }
  double kv_sum = 0;
  if (probe) d->membw.push_back(probe->Measure(kProbeReps));
  Stopwatch sw_dc(clock);
  for (int i = 0; i < k; ++i) {
    const kv::KvCache& c = ses[i]->impl().cache();
    for (int g = 0; g < o.gen; ++g) {
      kv_sum += KvRowBytes(c) + 2.0 * c.n_layer() * c.n_head_kv() * c.head(0, 0).row_bytes();  // + the new entry
      KVTRIM_RETURN_IF_ERROR(ses[i]->Decode(next[static_cast<size_t>(i) * o.gen + g]));
    }
  }
  b.spans_ns.push_back(sw_dc.Elapsed().ns);
  if (probe) d->membw.push_back(probe->Measure(kProbeReps));
  d->kv_read.push_back(kv_sum / (static_cast<double>(k) * o.gen));
  for (int i = 0; i < k; ++i) {
    const Session& s = *ses[i];
    d->evict_us.push_back((s.impl().compressor().compress_seconds() - comp_before[i]) * 1e6 / o.gen);
    d->entries.push_back(static_cast<double>(s.impl().cache().EntriesHeld()) / (s.impl().cache().n_layer() * s.impl().cache().n_head_kv()));
  }
  AddCounters(row, counters_before[0], ses[0]->impl().compressor().counters());
  row->kv_bytes = ses[0]->impl().cache().BytesHeld();
  row->kv_bytes_peak = ses[0]->peak_kv_bytes();
  row->kv_bytes_full = ses[0]->impl().cache().BytesFull();
  b.bytes_per_rep = ses[0]->impl().cache().BytesHeld();
  return b;
}

}  // namespace

Expected<std::vector<BenchRow>> RunBench(const Engine& e, const BenchOptions& o) {
  if (o.reps < 1) return MakeError("reps must be >= 1");
  if (o.gen < 1) return MakeError("gen must be >= 1");
  std::mt19937_64 rng(o.seed);
  std::vector<BenchRow> rows;
  // Warm-up, not timed: page-in of the weights, thread start-up, and the
  // CPU settling at speed (the first runs on a quiet VM were seen 2x slower).
  for (auto tw = Chrono::now(); Since(tw) < o.warmup_s;) {
    auto s = Session::Create(e, o.session);
    if (!s.ok()) return s.error();
    std::vector<int> toks(std::min(64, s.value()->ctx() - 1), e.impl().tokenizer().start());
    KVTRIM_RETURN_IF_ERROR(s.value()->Prefill(toks));
    for (int i = 0; i < 16 && s.value()->position() < s.value()->ctx(); ++i)
      KVTRIM_RETURN_IF_ERROR(s.value()->Decode(e.impl().tokenizer().start()));
  }
  const Clock& clock = o.clock ? *o.clock : SteadyClock();
  std::optional<ReadProbe> probe;
  if (o.membw_bytes > 0) probe.emplace(e.impl().pool(), o.membw_bytes);
  for (int depth : o.depths) {
    if (depth < 0) return MakeError("depth must be >= 0");
    BenchRow row;
    row.depth = depth;
    row.prefill_len = depth > 0 ? depth : (o.prefill_tokens > 0 ? o.prefill_tokens : 128);
    DepthSamples d;
    RepeatUntilResolved rep(clock, o.limits);
    for (int r = 0; r < o.reps; ++r) {
      auto m = rep.Measure([&](int k) { return BenchBatch(e, o, row.prefill_len, rng, clock, k, probe ? &*probe : nullptr, &d, &row); });
      if (!m.ok()) return m.error();
      const RepeatedTiming& t = m.value();
      d.pf.push_back(RatePerSecond(row.prefill_len, t.ns_per_rep[0]).value_or(0));
      d.dc.push_back(RatePerSecond(o.gen, t.ns_per_rep[1]).value_or(0));
      row.inner_reps = t.reps;
      row.below_resolution = row.below_resolution || !t.resolved;
      if (o.progress) o.progress("depth " + std::to_string(depth) + " rep " + std::to_string(r + 1));
    }
    row.prefill_tok_s = MeanSd(d.pf);
    row.decode_tok_s = MeanSd(d.dc);
    row.weight_bytes_per_tok = WeightBytesPerToken(e);
    row.prefill_flops_per_tok = PrefillFlopsPerToken(e, row.prefill_len);
    row.kv_bytes_per_tok = MeanSd(d.kv_read).mean;
    row.compress_ms = MeanSd(d.comp_ms).mean;
    row.prefill_compress_ms = MeanSd(d.chunk_ms).mean;
    row.first_decode_ms = MeanSd(d.first_ms).mean;
    row.compress_resolved = d.comp_total_ns >= clock.Span();
    row.evict_us_per_tok = MeanSd(d.evict_us).mean;
    row.entries_per_head = MeanSd(d.entries).mean;
    row.kv_ratio = MeanSd(d.ratios).mean;
    row.gb_s = (row.weight_bytes_per_tok + row.kv_bytes_per_tok) * row.decode_tok_s.mean / 1e9;
    row.mem_read_gb_s = MeanSd(d.membw);
    if (row.mem_read_gb_s.mean > 0) row.bw_share = row.gb_s / row.mem_read_gb_s.mean;
    rows.push_back(row);
  }
  return rows;
}

}  // namespace kvtrim
