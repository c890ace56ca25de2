#include "kvtrim/eval_calibrate.h"

#include "engine/engine_impl.h"

#include "io/tokenizer.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "eval/metrics.h"
#include "eval/tasks.h"
#include "kvtrim/eval_sweep.h"
#include "eval/threshold_match.h"
#include "kv/compressor.h"
#include "kv/policy.h"
#include "model/config.h"

namespace kvtrim::eval {

bool HeldOut(int i, double h) {
  if (!(h > 0)) return false;
  return std::floor((i + 1) * h + 1e-9) > std::floor(i * h + 1e-9);
}

namespace {

using Clock = std::chrono::steady_clock;

struct Context {
  std::string task;
  int index = 0;
  std::vector<int> context, question, answer;  // question empty for plain text
};

// Token-averaged NLL of `targets` from a session whose logits predict
// targets[0]; the first `skip` targets are not scored.
Expected<double> ForcedNll(Session& s, const std::vector<int>& targets, size_t V, size_t skip) {
  double sum = 0;
  size_t n = 0;
  if (skip == 0) sum += Nll(s.logits().data(), V, targets[0]), ++n;
  if (targets.size() > 1) {
    auto rows = s.ForwardAll(std::vector<int>(targets.begin(), targets.end() - 1));
    if (!rows.ok()) return rows.error();
    for (size_t i = std::max<size_t>(skip, 1); i < targets.size(); ++i, ++n) sum += Nll(&(*rows)[(i - 1) * V], V, targets[i]);
  }
  return n ? sum / static_cast<double>(n) : 0.0;
}

class Calibrator {
 public:
  Calibrator(const Engine& e, const CalibrateOptions& o) : e_(e), o_(o), V_(e.impl().config().vocab) {
    for (const auto& m : o.methods)
      for (double r : o.ratios) targets_.push_back(Options(m, r));
  }

  KvOptions Options(const std::string& method, double ratio) const { return MethodOptions(o_.kv, method, ratio); }

  // Grid points for one context; on a held-out context with fits, the checks at r*.
  Status Process(const Context& c, bool held, CalibrateResult* out) {
    SessionOptions so;
    so.fork_targets = targets_;
    auto base = Session::Create(e_, so);
    if (!base.ok()) return base.error();
    Session& b = *base.value();
    b.impl().compressor().BeginPrompt(static_cast<int64_t>(c.context.size()));  // SnapKV's window ends with the context
    auto rows = b.ForwardAll(c.context);
    if (!rows.ok()) return rows.error();
    const double nll_c = MeanNextTokenNll(rows.value(), c.context, V_);
    out->contexts.push_back({c.task, c.index, held, nll_c});
    auto ref = AnswerNll(b, c, Options("full", 1.0));
    if (!ref.ok()) return ref.error();
    for (const auto& m : o_.methods) {
      for (double r : o_.ratios) {
        auto y = Quality(b, c, Options(m, r), ref.value());
        if (!y.ok()) return y.error();
        out->points.push_back({m, c.task, c.index, held, r, nll_c, y.value()});
      }
      auto fit = out->fits.find(m);
      if (!held || fit == out->fits.end()) continue;
      for (double tau : o_.taus) {
        const double rs = RetentionForQuality(tau, fit->second.alpha * nll_c + fit->second.beta);
        auto y = Quality(b, c, Options(m, rs), ref.value());
        if (!y.ok()) return y.error();
        out->checks.push_back({m, c.task, c.index, tau, nll_c, rs, y.value(), y.value() >= tau});
      }
    }
    return {};
  }

 private:
  // NLL of the answer (needles) or of the continuation after its first token
  // (plain text, whose first token the uncompressed prefill predicts).
  Expected<double> AnswerNll(const Session& base, const Context& c, const KvOptions& kv) {
    auto s = base.Fork(kv);
    if (!s.ok()) return s.error();
    KVTRIM_RETURN_IF_ERROR(s.value()->Compress());
    if (!c.question.empty()) KVTRIM_RETURN_IF_ERROR(s.value()->Prefill(c.question));
    return ForcedNll(*s.value(), c.answer, V_, c.question.empty() ? 1 : 0);
  }
  // y = NLL(answer | q, c) / NLL(answer | q, c_r).
  Expected<double> Quality(const Session& base, const Context& c, const KvOptions& kv, double ref) {
    auto got = AnswerNll(base, c, kv);
    if (!got.ok()) return got.error();
    return got.value() > 0 ? ref / got.value() : 1.0;
  }

  const Engine& e_;
  const CalibrateOptions& o_;
  size_t V_;
  std::vector<KvOptions> targets_;
};

// Every context: needle samples of each task, then plain-text ones, per haystack.
Expected<std::vector<Context>> MakeContexts(const Engine& e, const CalibrateOptions& o, int context_tokens) {
  const io::Tokenizer& tok = e.impl().tokenizer();
  std::vector<Context> out;
  for (const auto& path : o.haystacks) {
    auto hay = Haystack::Load(path);
    if (!hay.ok()) return hay.error();
    TaskOptions to;
    to.context_tokens = context_tokens;
    to.seed = o.seed + 1000003ull * out.size();
    for (TaskKind k : o.tasks)
      for (int i = 0; i < o.samples; ++i) {
        auto ts = MakeSample(tok, hay.value(), k, to, i, o.samples);
        if (!ts.ok()) return ts.error();
        out.push_back({TaskName(k), static_cast<int>(out.size()), ts->context, ts->question, ts->answer});
      }
    if (!o.fidelity) continue;
    for (int i = 0; i < o.samples; ++i) {
      const int T = std::min(o.continuation, context_tokens / 2);
      std::vector<int> toks = {tok.start()};
      auto f = Filler(*hay, tok, context_tokens - 1, o.seed * 0x9E3779B97F4A7C15ull + 7919 * (out.size() + 1) + i);
      toks.insert(toks.end(), f.begin(), f.end());
      Context c{"fidelity", static_cast<int>(out.size()), {toks.begin(), toks.end() - T}, {}, {toks.end() - T, toks.end()}};
      out.push_back(std::move(c));
    }
  }
  return out;
}

Status Validate(const Engine& e, const CalibrateOptions& o) {
  if (o.methods.empty()) return MakeError("no methods to calibrate");
  for (const auto& m : o.methods)
    if (!kv::FindPolicy(MethodPolicy(m)) || m == "full" || MethodThreshold(m))
      return MakeError("cannot calibrate method '" + m + "'");
  if (o.ratios.empty()) return MakeError("no retention ratios given");
  for (double r : o.ratios)
    if (!(r > 0 && r <= 1)) return MakeError("retention ratio " + std::to_string(r) + " is outside (0, 1]");
  for (double t : o.taus)
    if (!(t > 0 && t <= 1)) return MakeError("quality target " + std::to_string(t) + " is outside (0, 1]");
  if (o.samples < 1) return MakeError("samples must be >= 1");
  if (o.haystacks.empty()) return MakeError("no haystack given");
  if (!(o.holdout >= 0 && o.holdout < 1)) return MakeError("held-out share must be in [0, 1)");
  if (o.context_tokens < 0 || o.context_tokens > e.impl().config().ctx) return MakeError("context length out of range");
  return {};
}

}  // namespace

Expected<CalibrateResult> RunCalibrate(const Engine& e, const CalibrateOptions& o) {
  KVTRIM_RETURN_IF_ERROR(Validate(e, o));
  auto t0 = Clock::now();
  constexpr int kAnswerRoom = 48;
  const int ctx_tokens = o.context_tokens > 0 ? std::min(o.context_tokens, e.impl().config().ctx - kAnswerRoom)
                                              : e.impl().config().ctx - kAnswerRoom;
  auto contexts = MakeContexts(e, o, ctx_tokens);
  if (!contexts.ok()) return contexts.error();
  CalibrateResult res;
  Calibrator cal(e, o);
  const int total = static_cast<int>(contexts->size());
  int done = 0;
  // Fit contexts first, then the fit, then the held-out contexts.
  for (int pass = 0; pass < 2; ++pass) {
    for (const Context& c : contexts.value()) {
      if (HeldOut(c.index, o.holdout) != (pass == 1)) continue;
      KVTRIM_RETURN_IF_ERROR(cal.Process(c, pass == 1, &res));
      if (o.progress) o.progress(++done, total);
    }
    if (pass == 1) break;
    for (const auto& m : o.methods) {
      std::vector<CalibSample> s;
      for (const CalibPoint& p : res.points)
        if (p.method == m && !p.held_out) s.push_back({p.r, p.nll_c, p.y});
      auto fit = FitCalibration(s, o.penalty);
      if (!fit.ok()) return MakeError("method '" + m + "': " + fit.error().message);
      res.fits[m] = fit.value();
    }
  }
  res.elapsed_s = std::chrono::duration<double>(Clock::now() - t0).count();
  return res;
}

}  // namespace kvtrim::eval
