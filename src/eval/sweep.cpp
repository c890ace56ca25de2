#include "eval/sweep.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <tuple>

#include "eval/metrics.h"
#include "eval/scoring.h"
#include "kv/cache.h"
#include "kv/compressor.h"
#include "model/config.h"

namespace kvtrim::eval {
namespace {

using Clock = std::chrono::steady_clock;

struct Samples {  // per-sample values of one cell
  std::vector<double> acc, kl, nll_ratio, bytes, bytes_full, comp_ms;
};
using CellKey = std::tuple<std::string, std::string, double>;  // task, method, ratio

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
    if (i + 1 < max_tokens && s.position() < s.ctx()) KVTRIM_RETURN_IF_ERROR(s.Decode(id));
  }
  return out;
}

// Logit rows predicting each of `targets`: the session's current logits, then
// those of teacher-forcing targets[0 .. n-2]. Returns [n, V].
Expected<std::vector<float>> ForcedLogits(Session& s, const std::vector<int>& targets) {
  std::vector<float> rows = s.logits();
  if (targets.size() > 1) {
    auto rest = s.ForwardAll(std::vector<int>(targets.begin(), targets.end() - 1));
    if (!rest.ok()) return rest.error();
    rows.insert(rows.end(), rest->begin(), rest->end());
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

class Sweep {
 public:
  Sweep(const Engine& e, const SweepOptions& o) : e_(e), o_(o), tok_(e.tokenizer()), V_(e.config().vocab) {
    for (const auto& m : o.methods) {
      if (m == "full") continue;
      for (double r : o.ratios) targets_.push_back(Options(m, r));
    }
  }

  KvOptions Options(const std::string& method, double ratio) const {
    KvOptions kv = o_.kv;
    kv.policy = method;
    kv.ratio = ratio;
    kv.budget_tokens = 0;
    if (method == "full") kv.quant = "f32";
    kv.params.clear();
    if (const kv::PolicyInfo* info = kv::FindPolicy(method))  // each policy takes only its own flags
      for (const auto& spec : info->params)
        if (o_.kv.params.count(spec.name)) kv.params[spec.name] = o_.kv.params.at(spec.name);
    return kv;
  }

  std::vector<double> RatiosOf(const std::string& method) const {
    return method == "full" ? std::vector<double>{1.0} : o_.ratios;
  }

  struct Measured {
    double accuracy;  // NaN when the task has none
    Fidelity fidelity;
  };

  // Forks the prefilled `base` into every (method, ratio), "full" first and at
  // ratio 1 only, compresses it, and records what `measure` finds under `task`.
  template <typename Measure>
  Status ForEachVariant(const Session& base, const std::string& task, Measure measure) {
    const double full_bytes = static_cast<double>(base.cache().BytesHeld());
    for (const auto& method : o_.methods)
      for (double r : RatiosOf(method)) {
        const KvOptions kv = Options(method, r);
        auto s = base.Fork(kv);
        if (!s.ok()) return s.error();
        auto t0 = Clock::now();
        KVTRIM_RETURN_IF_ERROR(s.value()->Compress());
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        const double bytes = static_cast<double>(s.value()->cache().BytesHeld());
        Expected<Measured> m = measure(kv, *s.value());
        if (!m.ok()) return m.error();
        Samples& c = cells_[{task, method, r}];
        c.acc.push_back(m->accuracy);
        c.kl.push_back(m->fidelity.kl);
        c.nll_ratio.push_back(m->fidelity.nll_ratio);
        c.bytes.push_back(bytes);
        c.bytes_full.push_back(full_bytes);
        c.comp_ms.push_back(ms);
      }
    return {};
  }

  Expected<std::unique_ptr<Session>> Base() const {
    SessionOptions so;
    so.fork_targets = targets_;
    return Session::Create(e_, so);
  }

  // One needle sample: the reference, then every method at every ratio.
  Status RunNeedle(const TaskSample& ts) {
    auto base = Base();
    if (!base.ok()) return base.error();
    std::vector<int> prompt = ts.context;
    if (o_.query_aware) prompt.insert(prompt.end(), ts.question.begin(), ts.question.end());
    KVTRIM_RETURN_IF_ERROR(base.value()->Prefill(prompt));
    std::vector<float> ref_rows;
    return ForEachVariant(*base.value(), TaskName(ts.kind), [&](const KvOptions& kv, Session& ses) -> Expected<Measured> {
      if (!o_.query_aware) KVTRIM_RETURN_IF_ERROR(ses.Prefill(ts.question));
      auto forced = ses.Fork(kv);
      if (!forced.ok()) return forced.error();
      auto rows = ForcedLogits(*forced.value(), ts.answer);
      if (!rows.ok()) return rows.error();
      if (ref_rows.empty()) ref_rows = rows.value();  // "full" comes first
      auto text = GreedyAnswer(ses, tok_, ts.question.back(), ts.max_answer_tokens);
      if (!text.ok()) return text.error();
      return Measured{ScoreAnswer(ts.kind, text.value(), ts.expected) ? 1.0 : 0.0,
                      Compare(ref_rows, rows.value(), ts.answer, V_, 0)};
    });
  }

  // One fidelity sample: compress the first part of a text, teacher-force the rest.
  Status RunFidelity(const Haystack& hay, int index, int context_tokens) {
    const int T = std::min(o_.fidelity_continuation, context_tokens / 2);
    std::vector<int> toks = {tok_.bos()};
    std::vector<int> filler = hay.Filler(tok_, context_tokens - 1, o_.seed * 0x9E3779B97F4A7C15ull + 7919 * index + 1);
    toks.insert(toks.end(), filler.begin(), filler.end());
    const std::vector<int> part1(toks.begin(), toks.end() - T), part2(toks.end() - T, toks.end());
    auto base = Base();
    if (!base.ok()) return base.error();
    KVTRIM_RETURN_IF_ERROR(base.value()->Prefill(part1));
    std::vector<float> ref_rows;
    return ForEachVariant(*base.value(), "fidelity", [&](const KvOptions&, Session& ses) -> Expected<Measured> {
      auto rows = ForcedLogits(ses, part2);
      if (!rows.ok()) return rows.error();
      if (ref_rows.empty()) ref_rows = rows.value();
      // Row 0 comes from the uncompressed prefill: score rows 1.. only.
      return Measured{NAN, Compare(ref_rows, rows.value(), part2, V_, 1)};
    });
  }

  std::vector<Cell> Cells(const std::vector<std::string>& task_order) const {
    std::vector<Cell> out;
    for (const auto& task : task_order)
      for (const auto& method : o_.methods)
        for (double r : RatiosOf(method)) {
          auto it = cells_.find({task, method, r});
          if (it == cells_.end()) continue;
          const Samples& s = it->second;
          Cell c;
          c.task = task, c.method = method, c.ratio = r;
          MeanSe acc = Summarize(s.acc), kl = Summarize(s.kl), nr = Summarize(s.nll_ratio);
          c.n = static_cast<int>(s.kl.size());
          c.accuracy = acc.mean, c.accuracy_se = acc.se;
          c.kl = kl.mean, c.kl_se = kl.se;
          c.nll_ratio = nr.mean, c.nll_ratio_se = nr.se;
          c.kv_bytes = Summarize(s.bytes).mean, c.kv_bytes_full = Summarize(s.bytes_full).mean;
          c.compress_ms = Summarize(s.comp_ms).mean;
          out.push_back(c);
        }
    return out;
  }

 private:
  const Engine& e_;
  const SweepOptions& o_;
  const io::Tokenizer& tok_;
  size_t V_;
  std::vector<KvOptions> targets_;
  std::map<CellKey, Samples> cells_;
};

}  // namespace

Expected<Report> RunSweep(const Engine& e, const SweepOptions& opts) {
  SweepOptions o = opts;
  if (o.samples < 1) return MakeError("samples must be >= 1");
  if (o.ratios.empty()) return MakeError("no retention ratios given");
  for (double r : o.ratios)
    if (!(r > 0 && r <= 1)) return MakeError("retention ratio " + std::to_string(r) + " is outside (0, 1]");
  o.methods.erase(std::remove(o.methods.begin(), o.methods.end(), "full"), o.methods.end());
  o.methods.insert(o.methods.begin(), "full");  // the reference runs first
  for (const auto& m : o.methods)
    if (!kv::FindPolicy(m)) return MakeError("unknown KV policy '" + m + "' (see `kvtrim policies`)");
  const int ctx = e.config().ctx;
  constexpr int kAnswerRoom = 48;  // four 7-digit values tokenize to ~36 tokens
  if (o.context_tokens <= 0) o.context_tokens = ctx - kAnswerRoom;
  if (o.context_tokens + kAnswerRoom > ctx) {
    return MakeError("context length " + std::to_string(o.context_tokens) + " + " + std::to_string(kAnswerRoom) +
                     " answer tokens exceeds the model's " + std::to_string(ctx));
  }
  auto hay = Haystack::Load(o.haystack);
  if (!hay.ok()) return hay.error();
  o.task.context_tokens = o.context_tokens;
  o.task.seed = o.seed;

  auto t0 = Clock::now();
  Sweep sweep(e, o);
  const int total = static_cast<int>(o.tasks.size()) * o.samples + (o.fidelity ? o.samples : 0);
  int done = 0;
  std::vector<std::string> order;
  for (TaskKind k : o.tasks) {
    order.push_back(TaskName(k));
    for (int i = 0; i < o.samples; ++i) {
      auto ts = MakeSample(e.tokenizer(), hay.value(), k, o.task, i, o.samples);
      if (!ts.ok()) return ts.error();
      KVTRIM_RETURN_IF_ERROR(sweep.RunNeedle(ts.value()));
      if (o.progress) o.progress(++done, total);
    }
  }
  if (o.fidelity) {
    order.push_back("fidelity");
    for (int i = 0; i < o.samples; ++i) {
      KVTRIM_RETURN_IF_ERROR(sweep.RunFidelity(hay.value(), i, o.context_tokens));
      if (o.progress) o.progress(++done, total);
    }
  }
  Report rep;
  rep.cells = sweep.Cells(order);
  rep.meta.haystack = hay->name();
  rep.meta.mode = o.query_aware ? "query-aware" : "query-agnostic";
  rep.meta.context_tokens = o.context_tokens;
  rep.meta.samples = o.samples;
  rep.meta.threads = e.threads();
  rep.meta.seed = o.seed;
  rep.meta.elapsed_s = std::chrono::duration<double>(Clock::now() - t0).count();
  return rep;
}

}  // namespace kvtrim::eval
