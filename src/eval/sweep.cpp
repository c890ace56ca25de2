#include "kvtrim/eval_sweep.h"

#include "engine/engine_impl.h"
#include "io/tokenizer.h"

#include "kvtrim/clock.h"
#include "kvtrim/conversation.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <sstream>

#include "eval/metrics.h"
#include "eval/tasks.h"
#include "eval/scoring.h"
#include "eval/task_file.h"
#include "eval/threshold_match.h"
#include "kv/cache.h"
#include "kv/calibration.h"
#include "kv/compressor.h"
#include "kvtrim/option_table.h"
#include "model/config.h"

namespace kvtrim::eval {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kFidelity = "fidelity";
constexpr const char* kFidelityDecode = "fidelity-decode";

int Argmax(const std::vector<float>& v) { return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin()); }

// Greedy continuation from a session whose logits predict the first answer
// token; stops at EOS or a newline.
Expected<std::string> GreedyAnswer(Session& s, const io::Tokenizer& tok, int prev, int max_tokens) {
  std::string out;
  for (int i = 0; i < max_tokens; ++i) {
    const int id = Argmax(s.logits());
    if (id == tok.eos()) break;
    const std::string piece = tok.Piece(prev, id);
    if (piece.find('\n') != std::string::npos) break;
    out += piece;
    prev = id;
    if (i + 1 < max_tokens && s.rope_position() < s.ctx()) KVTRIM_RETURN_IF_ERROR(s.Decode(id));
  }
  return out;
}

// Logit rows predicting each of `targets`: the session's current logits, then
// those of teacher-forcing targets[0 .. n-2] in one batch (no decode-time
// compression: the forced tokens are appended as they are). Returns [n, V].
Expected<std::vector<float>> ForcedLogits(Session& s, const std::vector<int>& targets) {
  std::vector<float> rows = s.logits();
  if (targets.size() > 1) {
    auto rest = s.ForwardAll(std::vector<int>(targets.begin(), targets.end() - 1));
    if (!rest.ok()) return rest.error();
    rows.insert(rows.end(), rest->begin(), rest->end());
  }
  return rows;
}

// The same rows, decoding the forced tokens one at a time, so a decode-time
// policy keeps the cache within its budget after every token.
Expected<std::vector<float>> DecodedLogits(Session& s, const std::vector<int>& targets) {
  std::vector<float> rows = s.logits();
  for (size_t i = 0; i + 1 < targets.size(); ++i) {
    KVTRIM_RETURN_IF_ERROR(s.Decode(targets[i]));
    rows.insert(rows.end(), s.logits().begin(), s.logits().end());
  }
  return rows;
}

struct Fidelity {
  double kl = 0, nll_ratio = 1;
};

Fidelity Compare(const std::vector<float>& ref, const std::vector<float>& got, const std::vector<int>& targets, size_t V,
                 size_t first_row) {
  double kl = 0, nll_ref = 0, nll_got = 0;
  size_t rows = 0;
  for (size_t i = first_row; i < targets.size(); ++i, ++rows) {
    kl += KlDivergence(&ref[i * V], &got[i * V], V);
    nll_ref += Nll(&ref[i * V], V, targets[i]);
    nll_got += Nll(&got[i * V], V, targets[i]);
  }
  if (rows == 0) return {};
  return {kl / rows, nll_ref > 0 ? nll_got / nll_ref : 1.0};
}

struct Measured {
  double accuracy;  // NaN when the task has none
  Fidelity fidelity;
  std::string note;  // non-empty: not measured
  double bytes = NAN, bytes_full = NAN;  // set: KV bytes measured after streaming, not after Compress
};

// One (task, sample) unit of work.
struct Unit {
  enum Kind { kNeedle, kExternal, kFidelity, kFidelityDecode, kMultiTurn } kind;
  std::string task;
  int sample;
  int index;  // position in the task's kind list (needle kind, task file)
};

// Entries each KV head holds, flat l * n_head_kv + h.
std::vector<int> HeadEntries(const kv::KvCache& c) {
  std::vector<int> n;
  for (int l = 0; l < c.n_layer(); ++l)
    for (int h = 0; h < c.n_head_kv(); ++h) n.push_back(c.head(l, h).size());
  return n;
}

// Per KV head (flat l * n_head_kv + h), the share of the token positions in
// `spans` ([start, start + length) of the prompt) that the head holds an
// entry for. Where a method's accuracy goes: does any head still hold the
// needle the question asks about?
std::vector<double> NeedleKept(const kv::KvCache& c, const std::vector<std::pair<int, int>>& spans) {
  long long total = 0;
  for (const auto& [start, len] : spans) total += len;
  std::vector<double> kept;
  for (int l = 0; l < c.n_layer(); ++l)
    for (int h = 0; h < c.n_head_kv(); ++h) {
      const auto& head = c.head(l, h);
      long long in = 0;
      for (int i = 0; i < head.size(); ++i)
        for (const auto& [start, len] : spans) in += head.pos(i) >= start && head.pos(i) < start + len;
      kept.push_back(total > 0 ? static_cast<double>(in) / static_cast<double>(total) : 0.0);
    }
  return kept;
}

class Sweep {
 public:
  // thresholds: T per (method, ratio) of the "POLICY+threshold" methods (MatchThreshold).
  Sweep(const Engine& e, const SweepOptions& o, const kv::Calibration* calib,
        std::map<std::pair<std::string, double>, double> thresholds)
      : e_(e), o_(o), tok_(e.impl().tokenizer()), V_(e.impl().config().vocab), calib_(calib), thresholds_(std::move(thresholds)) {
    for (const auto& m : o.methods) {
      if (m == "full") continue;
      for (double r : o.ratios) targets_.push_back(Options(m, r));
    }
  }

  // Prefills `prompt` into `base`; with a quality target, through all rows'
  // logits so NLL(context) (mean over its predicted tokens) picks r*.
  Status PrefillBase(Session& base, const std::vector<int>& prompt) {
    if (!calib_) return base.Prefill(prompt);
    auto rows = base.ForwardAll(prompt);
    if (!rows.ok()) return rows.error();
    context_nll_ = MeanNextTokenNll(rows.value(), prompt, V_);
    return {};
  }

  KvOptions Options(const std::string& method, double ratio) const {
    KvOptions kv = MethodOptions(o_.kv, method, ratio);
    if (auto it = thresholds_.find({method, ratio}); it != thresholds_.end()) kv.threshold = it->second;
    return kv;
  }

  std::vector<double> RatiosOf(const std::string& method) const {
    return method == "full" ? std::vector<double>{1.0} : o_.ratios;
  }

  bool chunked() const { return o_.kv.prefill_chunk > 0; }

  // The session a variant measures: a fork of the prefilled `base`, or with
  // --prefill-chunk (a prefill-time policy) its own prefill of `prompt` in
  // chunks, compressing as it goes. Null with *na set: the policy cannot
  // stream (Policy::StreamBlocker), or cannot reach the ratio (kUnreachable).
  Expected<std::unique_ptr<Session>> Variant(const Session& base, const std::vector<int>& prompt, const KvOptions& kv,
                                             std::string* na) const {
    if (!chunked()) return base.Fork(kv);
    auto p = kv::MakePolicy(kv.policy, kv.params);
    if (!p.ok()) return p.error();
    if (!p.value()->traits().prefill_time) return base.Fork(kv);
    if (const std::string why = kv::StreamBlocker(p.value()->traits()); !why.empty()) {
      *na = "n/a: --prefill-chunk: " + why;
      return std::unique_ptr<Session>();
    }
    SessionOptions so;
    so.kv = kv;
    auto s = Session::Create(e_, so);
    if (!s.ok()) return s.error();
    Status st = s.value()->Prefill(prompt);
    if (!st.ok() && st.code() == ErrorCode::kUnreachable) {  // as Compress() answers one-shot
      *na = "unreachable: " + st.message();
      return std::unique_ptr<Session>();
    }
    KVTRIM_RETURN_IF_ERROR(st);
    return s;
  }

  // Forks the prefilled `base` into every (method, ratio), "full" first and at
  // ratio 1 only (with --prefill-chunk: prefills `prompt` per Variant),
  // compresses it, and records what `measure` finds.
  template <typename Measure>
  Status ForEachVariant(const Session& base, const std::vector<int>& prompt, const Unit& u, Measure measure) {
    const bool decode_protocol =
        u.kind == Unit::kFidelityDecode || (o_.stream_context && (u.kind == Unit::kNeedle || u.kind == Unit::kExternal));
    // Bytes the entries occupy (allocation slack aside), as `run` reports them.
    const double full_bytes = static_cast<double>(base.impl().cache().BytesUsed());
    for (const auto& method : o_.methods)
      for (double r : RatiosOf(method)) {
        double chosen = NAN;
        if (calib_ && method != "full") {
          auto c = kv::ChooseRatio(*calib_, method, context_nll_, o_.quality);
          if (!c.ok()) return c.error();
          chosen = c.value();
        }
        const KvOptions kv = Options(method, std::isnan(chosen) ? r : chosen);
        SampleRecord rec;
        rec.task = u.task, rec.method = method, rec.ratio = r, rec.unit = unit_, rec.sample = u.sample;
        rec.truncated = truncating_;
        rec.chosen_ratio = chosen;
        auto s = Variant(base, prompt, kv, &rec.note);
        if (!s.ok()) return s.error();
        if (!s.value()) {  // cannot stream: not measured
          records_.push_back(std::move(rec));
          continue;
        }
        if (decode_protocol && method != "full" && !s.value()->impl().compressor().policy().traits().decode_time) {
          rec.note = "n/a: prefill-time policy (no decode-time compression)";  // not even compressed
          records_.push_back(std::move(rec));
          continue;
        }
        // With --prefill-chunk, the compression between chunks counts too.
        const double chunks_ms = chunked() ? s.value()->impl().compressor().compress_seconds() * 1e3 : 0.0;
        auto t0 = Clock::now();
        Status st = s.value()->Compress();
        // A reference pass another cell of this context ran is charged as if run here.
        rec.compress_ms = chunks_ms + std::chrono::duration<double, std::milli>(Clock::now() - t0).count() +
                          s.value()->impl().compressor().reused_pass_seconds() * 1e3;
        if (!st.ok() && st.code() != ErrorCode::kUnreachable) return st.error();
        if (!st.ok()) {
          rec.note = "unreachable: " + st.message();
        } else {
          rec.kv_bytes = static_cast<double>(s.value()->impl().cache().BytesUsed());
          rec.kv_bytes_full = full_bytes;
          rec.entries_compressed = static_cast<long long>(s.value()->impl().cache().EntriesHeld());
          const kv::Compressor& comp = s.value()->impl().compressor();  // budgets that differ per head
          if (comp.adaptive() || comp.threshold() || comp.head_budgets() ||
              comp.policy().traits().budget.kind == kv::budget::Kind::kShared)
            rec.head_entries = HeadEntries(s.value()->impl().cache());
          if (!needle_spans_.empty() && !o_.stream_context) rec.needle_kept = NeedleKept(s.value()->impl().cache(), needle_spans_);
          Expected<Measured> m = measure(kv, *s.value());
          if (!m.ok()) return m.error();
          rec.accuracy = m->accuracy, rec.kl = m->fidelity.kl, rec.nll_ratio = m->fidelity.nll_ratio;
          rec.note = m->note;
          if (!std::isnan(m->bytes)) rec.kv_bytes = m->bytes, rec.kv_bytes_full = m->bytes_full;
          rec.entries_end = static_cast<long long>(s.value()->impl().cache().EntriesHeld());
          rec.kv_bytes_peak = static_cast<double>(s.value()->peak_kv_bytes());
          for (const auto& [name, v] : s.value()->impl().compressor().counters())
            rec.counters.emplace_back(name, static_cast<double>(v));
          // Nonuniform head budgets from the profile: shown in the cell (1 = on).
          if (s.value()->impl().compressor().head_budgets()) rec.counters.emplace_back("head-budgets", 1.0);
        }
        records_.push_back(std::move(rec));
      }
    return {};
  }

  Expected<std::unique_ptr<Session>> Base() const {
    SessionOptions so;
    // With --prefill-chunk every prefill-time policy prefills on its own (Variant).
    if (!chunked()) so.fork_targets = targets_;
    return Session::Create(e_, so);
  }

  // A question-answer unit: context (compressed), question, greedy answer
  // scored by `score`, and the teacher-forced reference answer's fidelity.
  template <typename Score>
  Status RunQa(const Unit& u, const std::vector<int>& context, const std::vector<int>& question,
               const std::vector<int>& answer, int max_answer, Score score) {
    auto base = Base();
    if (!base.ok()) return base.error();
    std::vector<int> prompt = context;
    if (o_.query_aware) prompt.insert(prompt.end(), question.begin(), question.end());
    // Streamed: only BOS is prefilled; every method decodes the rest token by
    // token under its budget (decode-time compression from the first token).
    const std::vector<int> streamed = o_.stream_context ? std::vector<int>(prompt.begin() + 1, prompt.end())
                                                        : std::vector<int>{};
    if (o_.stream_context) prompt.resize(1);
    KVTRIM_RETURN_IF_ERROR(PrefillBase(*base.value(), prompt));
    std::vector<float> ref_rows;
    return ForEachVariant(*base.value(), prompt, u, [&](const KvOptions& kv, Session& ses) -> Expected<Measured> {
      for (int t : streamed) KVTRIM_RETURN_IF_ERROR(ses.Decode(t));
      double bytes = NAN;
      if (!streamed.empty()) {
        bytes = static_cast<double>(ses.impl().cache().BytesUsed());
        if (kv.policy == "full") stream_full_bytes_ = bytes;  // "full" comes first
      }
      if (!o_.query_aware) KVTRIM_RETURN_IF_ERROR(ses.Prefill(question));
      auto forced = ses.Fork(kv);
      if (!forced.ok()) return forced.error();
      auto rows = ForcedLogits(*forced.value(), answer);
      if (!rows.ok()) return rows.error();
      if (ref_rows.empty()) ref_rows = rows.value();  // "full" comes first
      auto text = GreedyAnswer(ses, tok_, question.back(), max_answer);
      if (!text.ok()) return text.error();
      return Measured{score(text.value()), Compare(ref_rows, rows.value(), answer, V_, 0), "", bytes,
                      std::isnan(bytes) ? NAN : stream_full_bytes_};
    });
  }

  Status RunNeedle(const Unit& u, const Haystack& hay) {
    auto ts = MakeSample(tok_, hay, o_.tasks[u.index], o_.task, u.sample, o_.samples);
    if (!ts.ok()) return ts.error();
    const TaskSample& t = ts.value();
    needle_spans_.clear();
    for (int a : t.asked_needles) needle_spans_.emplace_back(t.needle_starts[a], t.needle_lengths[a]);
    Status st = RunQa(u, t.context, t.question, t.answer, t.max_answer_tokens,
                      [&](const std::string& out) { return ScoreAnswer(t.kind, out, t.expected) ? 1.0 : 0.0; });
    needle_spans_.clear();
    return st;
  }

  // A conversation (niah-multiturn): every (method, ratio) runs it from the
  // start as a Conversation, compressed after every turn (the scripted
  // answers fed as they are), then answers the question greedily. Bytes
  // and entries are the cache's at the question; the full cache's first.
  Status RunMultiTurn(const Unit& u, const Haystack& hay) {
    auto cs = MakeConversationSample(e_, hay, o_.task, u.sample, o_.samples);
    if (!cs.ok()) return cs.error();
    double full_bytes = NAN;
    for (const auto& method : o_.methods)
      for (double r : RatiosOf(method)) {
        SampleRecord rec;
        rec.task = u.task, rec.method = method, rec.ratio = r, rec.unit = unit_, rec.sample = u.sample;
        SessionOptions so;
        so.kv = Options(method, r);
        so.ctx = o_.task.conversation_ctx;
        auto c = Conversation::Create(e_, so);
        if (!c.ok()) {
          rec.note = "n/a: " + c.error().message;
          records_.push_back(std::move(rec));
          continue;
        }
        Conversation& conv = *c.value();
        const auto t0 = Clock::now();
        // Room for the turn and its answer (the scripted reply's tokens, or
        // the question's answer): past the sessions' context length a
        // conversation is re-based first.
        auto turn = [&](const std::string& user, size_t answer) -> Status {
          auto t = conv.TurnTokens({{"user", user}});
          if (!t.ok()) return t.error();
          return conv.BeginTurn({{"user", user}}, t.value(), answer);
        };
        Status st;
        for (const auto& [user, reply] : cs->exchanges) {
          st = turn(user, tok_.Encode(reply, false).size());
          if (st.ok()) st = conv.ForceAnswer(reply);
          if (!st.ok()) break;
        }
        if (st.ok()) st = turn(cs->question, kAnswerRoom);
        if (!st.ok() && st.code() == ErrorCode::kUnreachable) {  // as Compress() answers one context
          rec.note = "unreachable: " + st.message();
          records_.push_back(std::move(rec));
          continue;
        }
        KVTRIM_RETURN_IF_ERROR(st);
        rec.compress_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        const kv::KvCache& cache = conv.session().impl().cache();
        rec.kv_bytes = static_cast<double>(cache.BytesUsed());
        if (method == "full") full_bytes = rec.kv_bytes;
        rec.kv_bytes_full = full_bytes;
        rec.entries_compressed = static_cast<long long>(cache.EntriesHeld());
        auto text = GreedyAnswer(conv.session(), tok_, conv.session().tokens().back(), cs->max_answer_tokens);
        if (!text.ok()) return text.error();
        rec.accuracy = ScoreAnswer(TaskKind::kMultiTurn, text.value(), cs->expected) ? 1.0 : 0.0;
        rec.entries_end = static_cast<long long>(cache.EntriesHeld());
        rec.kv_bytes_peak = static_cast<double>(conv.peak_kv_bytes());
        for (const auto& [name, v] : conv.session().impl().compressor().counters())
          rec.counters.emplace_back(name, static_cast<double>(v));
        records_.push_back(std::move(rec));
      }
    return {};
  }

  Status RunExternal(const Unit& u, const TaskFile& tf) {
    const ExternalSample& s = tf.samples[u.sample];
    // The needle tasks' budget: --context tokens of prompt plus the answer room.
    auto p = BuildExternalPrompt(tok_, s, std::min(o_.context_tokens + kAnswerRoom, e_.impl().config().ctx), o_.truncate_long);
    if (!p.ok() && p.error().code == ErrorCode::kUnreachable) {  // skipped: too long
      SampleRecord rec;
      rec.task = u.task, rec.method = "full", rec.unit = unit_, rec.sample = u.sample;
      rec.note = "skipped: " + p.error().message;
      records_.push_back(rec);

      return {};
    }
    if (!p.ok()) return p.error();
    truncating_ = p->truncated;
    Status st = RunQa(u, p->context, p->question, p->answer, p->max_answer_tokens,
                 [&](const std::string& out) { return ScoreExternal(s.format, out, s.answers); });
    truncating_ = false;
    return st;
  }

  // Plain text: compress the first part, then teacher-force the rest, either
  // appended as it is (fidelity) or decoded under the budget (fidelity-decode).
  Status RunFidelity(const Unit& u, const Haystack& hay) {
    const bool decode = u.kind == Unit::kFidelityDecode;
    const int T = std::min(o_.fidelity_continuation, o_.context_tokens / 2);
    std::vector<int> toks = {tok_.start()};
    std::vector<int> filler =
        Filler(hay, tok_, o_.context_tokens - 1, o_.seed * 0x9E3779B97F4A7C15ull + 7919 * u.sample + 1);
    toks.insert(toks.end(), filler.begin(), filler.end());
    const std::vector<int> part1(toks.begin(), toks.end() - T), part2(toks.end() - T, toks.end());
    auto base = Base();
    if (!base.ok()) return base.error();
    KVTRIM_RETURN_IF_ERROR(PrefillBase(*base.value(), part1));
    std::vector<float> ref_rows;
    return ForEachVariant(*base.value(), part1, u, [&](const KvOptions&, Session& ses) -> Expected<Measured> {
      auto rows = decode ? DecodedLogits(ses, part2) : ForcedLogits(ses, part2);
      if (!rows.ok()) return rows.error();
      if (ref_rows.empty()) ref_rows = rows.value();
      // Row 0 comes from the uncompressed prefill: score rows 1.. only.
      return Measured{NAN, Compare(ref_rows, rows.value(), part2, V_, 1), ""};
    });
  }

  Status Run(const Unit& u, int unit, const Haystack& hay, const std::vector<TaskFile>& files) {
    unit_ = unit;
    switch (u.kind) {
      case Unit::kNeedle: return RunNeedle(u, hay);
      case Unit::kMultiTurn: return RunMultiTurn(u, hay);
      case Unit::kExternal: return RunExternal(u, files[u.index]);
      default: return RunFidelity(u, hay);
    }
  }

  std::vector<SampleRecord>& records() { return records_; }

 private:
  const Engine& e_;
  const SweepOptions& o_;
  const io::Tokenizer& tok_;
  size_t V_;
  const kv::Calibration* calib_;  // non-null: --kv-quality
  std::map<std::pair<std::string, double>, double> thresholds_;
  std::vector<KvOptions> targets_;
  std::vector<SampleRecord> records_;
  double context_nll_ = NAN;      // NLL(c) of the current unit's context
  double stream_full_bytes_ = NAN;  // --stream-context: the full cache's bytes after streaming
  bool truncating_ = false;  // the current unit's sample was truncated
  std::vector<std::pair<int, int>> needle_spans_;  // the current needle unit's asked needles: (start, length)
  int unit_ = 0;
};

// Every unit of the whole sweep, in the order cells are summed.
std::vector<Unit> AllUnits(const SweepOptions& o, const std::vector<TaskFile>& files) {
  std::vector<Unit> units;
  for (size_t k = 0; k < o.tasks.size(); ++k)
    for (int i = 0; i < o.samples; ++i)
      units.push_back({o.tasks[k] == TaskKind::kMultiTurn ? Unit::kMultiTurn : Unit::kNeedle, TaskName(o.tasks[k]), i,
                       static_cast<int>(k)});
  for (size_t f = 0; f < files.size(); ++f)
    for (int i = 0; i < static_cast<int>(files[f].samples.size()) && i < o.samples; ++i)
      units.push_back({Unit::kExternal, files[f].name, i, static_cast<int>(f)});
  if (o.fidelity)
    for (int i = 0; i < o.samples; ++i) units.push_back({Unit::kFidelity, kFidelity, i, 0});
  if (o.fidelity_decode)
    for (int i = 0; i < o.samples; ++i) units.push_back({Unit::kFidelityDecode, kFidelityDecode, i, 0});
  return units;
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

Status Check(SweepOptions& o, const Engine& e) {
  if (o.samples < 1) return MakeError("samples must be >= 1");
  if (o.ratios.empty()) return MakeError("no retention ratios given");
  for (double r : o.ratios)
    if (!(r > 0 && r <= 1)) return MakeError("retention ratio " + std::to_string(r) + " is outside (0, 1]");
  if (o.stream_context && o.quality > 0) return MakeError("--stream-context and --kv-quality do not combine");
  if (o.quality < 0 || o.quality > 1) return MakeError("--kv-quality must be in (0, 1]");
  if (o.quality > 0) {
    if (o.calibration.empty()) return MakeError("--kv-quality needs --calibration FILE (from `kvtrim calibrate`)");
    o.ratios = {o.quality};  // one cell per method, keyed by the target
  }
  if (o.shard_count < 1 || o.shard_index < 0 || o.shard_index >= o.shard_count)
    return MakeError("shard " + std::to_string(o.shard_index) + "/" + std::to_string(o.shard_count) +
                     " is not of the form i/n with 0 <= i < n");
  o.methods.erase(std::remove(o.methods.begin(), o.methods.end(), "full"), o.methods.end());
  o.methods.insert(o.methods.begin(), "full");  // the reference runs first
  for (const auto& m : o.methods)
    if (!kv::FindPolicy(MethodPolicy(m))) return MakeError("unknown KV policy '" + m + "' (see `kvtrim policies`)");
  const int ctx = e.impl().config().ctx;
  if (o.context_tokens <= 0) o.context_tokens = ctx - kAnswerRoom;
  if (o.context_tokens + kAnswerRoom > ctx) {
    return MakeError("context length " + std::to_string(o.context_tokens) + " + " + std::to_string(kAnswerRoom) +
                     " answer tokens exceeds the model's " + std::to_string(ctx));
  }
  if (o.tasks.empty() && o.task_files.empty() && !o.fidelity && !o.fidelity_decode)
    return MakeError("nothing to run: no needle tasks, task files or fidelity tasks");
  return {};
}

// T for every (POLICY+threshold, ratio), matched on calibration contexts of
// the sweep's length (seed + 1000: never the samples), each with a note.
Expected<std::map<std::pair<std::string, double>, double>> MatchThresholds(const Engine& e, const SweepOptions& o,
                                                                          std::vector<std::string>* notes) {
  std::map<std::pair<std::string, double>, double> out;
  std::vector<std::vector<int>> contexts;
  for (const auto& m : o.methods) {
    if (!MethodThreshold(m)) continue;
    if (o.quality > 0) return MakeError("'" + m + "': a threshold method has no ratio for --kv-quality to choose");
    if (contexts.empty()) {
      auto c = HeadBudgetContexts(e, o.haystack, kThresholdContexts, o.context_tokens, 0, o.seed + 1000);
      if (!c.ok()) return c.error();
      contexts = std::move(c.value());
    }
    // The method's options but for the ratio, which the threshold replaces.
    auto t = MatchThreshold(e, MethodOptions(o.kv, m, 1.0), o.ratios, contexts);
    if (!t.ok()) return Error{"'" + m + "': " + t.error().message, t.error().code};
    for (size_t i = 0; i < o.ratios.size(); ++i) {
      const double r = o.ratios[i];
      out[{m, r}] = t.value()[i].threshold;
      char b[200];
      std::snprintf(b, sizeof b, "%s at %g: T = %.4g (held %.2f%% of the entries on %d haystack contexts of %d tokens)",
                    m.c_str(), r, t.value()[i].threshold, 100 * t.value()[i].held, kThresholdContexts,
                    o.context_tokens);
      notes->push_back(b);
    }
  }
  return out;
}

}  // namespace

namespace {
constexpr const char kAdaptiveSuffix[] = "+adaptive";
}

bool MethodAdaptive(const std::string& method) {
  const size_t n = sizeof(kAdaptiveSuffix) - 1;
  return method.size() > n && method.compare(method.size() - n, n, kAdaptiveSuffix) == 0;
}

std::string MethodPolicy(const std::string& method) {
  if (MethodThreshold(method)) return method.substr(0, method.size() - (sizeof(kThresholdSuffix) - 1));
  return MethodAdaptive(method) ? method.substr(0, method.size() - (sizeof(kAdaptiveSuffix) - 1)) : method;
}

KvOptions MethodOptions(const KvOptions& shared, const std::string& spec, double ratio) {
  KvOptions kv = shared;
  const std::string method = MethodPolicy(spec);
  kv.policy = method;
  if (MethodAdaptive(spec)) kv.head_budget = "adaptive";
  kv.ratio = ratio;
  kv.ratio_explicit = true;  // a cell's ratio is the target, 1 = keep everything
  kv.quality = 0;            // the caller picks r* itself (--kv-quality)
  kv.calibration.clear();
  kv.budget_tokens = 0;
  if (method == "full") kv.quant = "f32";
  kv.params.clear();
  if (const kv::PolicyInfo* info = kv::FindPolicy(method))  // each policy takes only its own flags
    for (const auto& spec : info->params)
      if (shared.params.count(spec.name)) kv.params[spec.name] = shared.params.at(spec.name);
  return kv;
}

std::string Fingerprint(const SweepOptions& o) {
  std::ostringstream os;
  std::vector<std::string> tasks;
  for (TaskKind k : o.tasks) tasks.push_back(TaskName(k));
  os << "methods=" << Join(o.methods) << ";ratios=";
  for (double r : o.ratios) os << r << ",";
  os << ";tasks=" << Join(tasks) << ";files=" << Join(o.task_files) << ";truncate=" << o.truncate_long
     << ";fidelity=" << o.fidelity << o.fidelity_decode << ";samples=" << o.samples << ";seed=" << o.seed
     << ";context=" << o.context_tokens << ";aware=" << o.query_aware << ";stream=" << o.stream_context << ";haystack=" << o.haystack
     << ";cont=" << o.fidelity_continuation << ";needles=" << o.task.needles << ";queries=" << o.task.queries << ";turns=" << o.task.turns
     << ";quality=" << o.quality << ":" << o.calibration << ";head_budgets=" << o.kv.head_budgets
     << ";kv:" << KvOptionsFingerprint(o.kv) << "params=";  // every option of the table
  for (const auto& [k, v] : o.kv.params) os << k << ":" << v << ",";
  return os.str();
}

Expected<Report> RunSweep(const Engine& e, const SweepOptions& opts) {
  SweepOptions o = opts;
  KVTRIM_RETURN_IF_ERROR(Check(o, e));
  auto hay = Haystack::Load(o.haystack);
  if (!hay.ok()) return hay.error();
  o.task.context_tokens = o.context_tokens;
  o.task.seed = o.seed;
  std::vector<TaskFile> files;
  for (const auto& path : o.task_files) {
    auto tf = ReadTaskFile(path);
    if (!tf.ok()) return tf.error();
    files.push_back(std::move(tf.value()));
  }

  auto t0 = Clock::now();
  Report rep;
  ReportMeta& m = rep.meta;
  const std::vector<Unit> units = AllUnits(o, files);
  for (const Unit& u : units)
    if (std::find(m.tasks.begin(), m.tasks.end(), u.task) == m.tasks.end()) m.tasks.push_back(u.task);
  m.methods = o.methods;
  m.ratios = o.ratios;
  m.units_total = static_cast<int>(units.size());
  m.fingerprint = Fingerprint(o);
  if (o.shard_count > 1) m.shard = std::to_string(o.shard_index) + "/" + std::to_string(o.shard_count);
  m.max_context = o.truncate_long ? "truncate" : "skip";
  for (size_t u = o.shard_index; u < units.size(); u += o.shard_count) m.units.push_back(static_cast<int>(u));

  std::optional<kv::Calibration> calib;
  if (o.quality > 0) {
    auto c = kv::LoadCalibration(o.calibration);
    if (!c.ok()) return c.error();
    for (const auto& method : o.methods)
      if (method != "full" && !c->Find(method))
        return MakeError("method '" + method + "' is not in the calibration file '" + o.calibration +
                         "' (run `kvtrim calibrate --methods ...` with it)");
    calib = std::move(c.value());
  }
  auto thresholds = MatchThresholds(e, o, &m.notes);
  if (!thresholds.ok()) return thresholds.error();
  Sweep sweep(e, o, calib ? &*calib : nullptr, std::move(thresholds.value()));
  int done = 0;
  for (int u : m.units) {
    KVTRIM_RETURN_IF_ERROR(sweep.Run(units[u], u, hay.value(), files));
    if (o.progress) o.progress(++done, static_cast<int>(m.units.size()));
  }
  rep.samples = std::move(sweep.records());
  m.context_tokens = o.context_tokens;
  m.quality_target = o.quality;
  m.kv_storage = KvStorage(o.kv.quant, o.kv.quant_at, o.kv.rotate);
  if (o.kv.prefill_chunk > 0)  // when entries are compressed, beside when they are quantized
    m.kv_storage += "; prompt prefilled in chunks of " + std::to_string(o.kv.prefill_chunk) +
                    " tokens, every head brought within its budget after each (--prefill-chunk)";
  m.clock_step_ns = SteadyClock().step_ns;
  rep.cells = SummarizeCells(m, rep.samples);
  m.task_file_notes = TaskFileNotes(m, rep.samples);
  m.haystack = hay->name();
  m.mode = std::string(o.query_aware ? "query-aware" : "query-agnostic") +
           (o.stream_context ? ", streamed context (decode-time compression)" : "");
  m.samples = o.samples;
  m.threads = e.threads();
  m.seed = o.seed;
  m.elapsed_s = std::chrono::duration<double>(Clock::now() - t0).count();
  return rep;
}

}  // namespace kvtrim::eval
