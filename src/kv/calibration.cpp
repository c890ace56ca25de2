#include "kv/calibration.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kvtrim/calib_fit.h"

namespace kvtrim::kv {

const MethodCalibration* Calibration::Find(const std::string& method) const {
  for (const auto& m : methods)
    if (m.method == method) return &m;
  return nullptr;
}

Expected<Calibration> LoadCalibration(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return MakeError("cannot open calibration file '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return MakeError("calibration file '" + path + "' is not a JSON object");
  if (!j.contains("methods") || !j["methods"].is_object())
    return MakeError("calibration file '" + path + "' has no \"methods\" object");
  Calibration c;
  if (j.contains("model") && j["model"].is_string()) c.model = j["model"].get<std::string>();
  if (j.contains("penalty") && j["penalty"].is_number()) c.penalty = j["penalty"].get<double>();
  for (const auto& [name, m] : j["methods"].items()) {
    if (!m.is_object() || !m.contains("alpha") || !m.contains("beta") || !m["alpha"].is_number() ||
        !m["beta"].is_number())
      return MakeError("calibration file '" + path + "': method '" + name + "' lacks numeric alpha and beta");
    MethodCalibration mc;
    mc.method = name;
    mc.alpha = m["alpha"].get<double>();
    mc.beta = m["beta"].get<double>();
    if (m.contains("rmse") && m["rmse"].is_number()) mc.rmse = m["rmse"].get<double>();
    if (m.contains("n") && m["n"].is_number_integer()) mc.n = m["n"].get<int>();
    if (!std::isfinite(mc.alpha) || !std::isfinite(mc.beta))
      return MakeError("calibration file '" + path + "': method '" + name + "' has non-finite alpha or beta");
    c.methods.push_back(mc);
  }
  return c;
}

Expected<double> ChooseRatio(const Calibration& c, const std::string& method, double nll_c, double tau) {
  if (!(tau > 0 && tau <= 1)) return MakeError("quality target " + std::to_string(tau) + " is outside (0, 1]");
  if (!std::isfinite(nll_c)) return MakeError("context NLL is not finite (a context of at least two tokens is needed)");
  const MethodCalibration* m = c.Find(method);
  if (!m) {
    std::string known;
    for (const auto& x : c.methods) known += (known.empty() ? "" : ", ") + x.method;
    return MakeError("method '" + method + "' is not in the calibration (has: " + known + ")");
  }
  return RetentionForQuality(tau, m->alpha * nll_c + m->beta);
}

}  // namespace kvtrim::kv
