// `kvtrim calibrate` (METHODS.md section 3): per method, triples
// (r, NLL(c), y) with y = NLL(answer | q, c) / NLL(answer | q, c_r) on needle
// tasks and plain-text continuations at several retention ratios; the fit of
// (alpha, beta) with the heavier penalty for over-predicted quality; and, on
// contexts held out of the fit, whether compressing at the chosen r* meets
// the quality target.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kvtrim/eval_tasks.h"
#include "kvtrim/calib_fit.h"
#include "kvtrim/engine.h"

namespace kvtrim::eval {

struct CalibrateOptions {
  std::vector<std::string> methods;
  std::vector<double> ratios = {0.1, 0.25, 0.5, 0.75};
  std::vector<TaskKind> tasks = {TaskKind::kNiah, TaskKind::kPasskey};
  bool fidelity = true;             // plain-text continuations too
  std::vector<std::string> haystacks;
  int samples = 8;                  // contexts per task and haystack
  uint64_t seed = 1;
  int context_tokens = 0;           // 0: the model's context minus the answer room
  int continuation = 64;            // fidelity: teacher-forced tokens after the context
  double holdout = 0.25;            // share of contexts kept out of the fit
  std::vector<double> taus = {0.9, 0.95};  // targets checked on the held-out contexts
  double penalty = 4;               // weight on over-predicting residuals
  KvOptions kv;                     // policy flags shared by all methods
  std::function<void(int done, int total)> progress;
};

struct CalibPoint {
  std::string method, task;
  int context = 0;     // index of the context
  bool held_out = false;
  double r = 1, nll_c = 0, y = 1;
};

struct HeldOutCheck {  // compressing a held-out context at r* for tau
  std::string method, task;
  int context = 0;
  double tau = 0, nll_c = 0, r_star = 1, y = 1;
  bool met = false;
};

struct CalibContext {
  std::string task;
  int context = 0;
  bool held_out = false;
  double nll_c = 0;
};

struct CalibrateResult {
  std::vector<CalibContext> contexts;
  std::vector<CalibPoint> points;
  std::map<std::string, CalibFit> fits;  // per method, from the non-held-out points
  std::vector<HeldOutCheck> checks;
  double elapsed_s = 0;
};

// Whether context i (of a deterministic sequence) is held out at share h.
bool HeldOut(int i, double h);
Expected<CalibrateResult> RunCalibrate(const Engine& e, const CalibrateOptions& o);
// The calibration file (read back by kv::LoadCalibration): model, penalty,
// per method alpha, beta, rmse, residuals; points and held-out checks.
Status WriteCalibration(const CalibrateResult& r, const CalibrateOptions& o, const std::string& model,
                        const std::string& path);
// Summary lines: per method the fit and, per tau, the share of held-out
// contexts meeting it with the mean and quartiles of r*.
std::string FormatCalibration(const CalibrateResult& r);
// gnuplot: predicted f(r; k) against measured y (fit and held-out points),
// and the distribution (CDF) of r* over every context per method and tau.
// Returns the files written.
Expected<std::vector<std::string>> WriteCalibrationPlots(const CalibrateResult& r, const std::string& dir);

}  // namespace kvtrim::eval
