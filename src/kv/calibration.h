// A calibration file (written by `kvtrim calibrate`): per method the fitted
// (alpha, beta) of the quality curve f(r; k = alpha NLL(c) + beta) (METHODS.md
// section 3), and the choice of the retention ratio r* for a quality target.
#pragma once
#include <string>
#include <vector>

#include "kvtrim/status.h"

namespace kvtrim::kv {

struct MethodCalibration {
  std::string method;
  double alpha = 0, beta = 0;
  double rmse = 0;
  int n = 0;  // samples fitted
};

struct Calibration {
  std::string model;
  double penalty = 4;
  std::vector<MethodCalibration> methods;
  const MethodCalibration* Find(const std::string& method) const;
};

// Reads the fit from a calibration JSON file (errors name the problem).
Expected<Calibration> LoadCalibration(const std::string& path);
// k = alpha NLL(c) + beta for `method`, then r* = the smallest r with
// f(r) >= tau, in (0, 1]. Errors when the method was not calibrated or tau is
// outside (0, 1] or nll_c is not finite.
Expected<double> ChooseRatio(const Calibration& c, const std::string& method, double nll_c, double tau);

}  // namespace kvtrim::kv
