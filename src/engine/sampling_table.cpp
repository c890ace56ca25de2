#include <limits>
#include <sstream>

#include "kvtrim/sampling.h"

namespace kvtrim {

const std::vector<SamplingOptionSpec>& SamplingOptionTable() {
  using S = SamplingOptions;
  constexpr double kIntMax = std::numeric_limits<int>::max();
  static const std::vector<SamplingOptionSpec> t = {
      {"temp", "temperature", "Temperature, applied last (0: greedy, after the repetition penalty)", &S::temp, 0, 100, false, ""},
      {"top-k", "top_k", "Keep the K most likely tokens (0: off)", &S::top_k, 0, kIntMax, false, ""},
      {"top-p", "top_p", "Nucleus: keep the most likely tokens until their mass reaches P (1: off)", &S::top_p, 0, 1, false, ""},
      {"min-p", "min_p", "Keep the tokens at least P times as likely as the most likely one (0: off)", &S::min_p, 0, 1,
       false, "0.05"},
      {"repeat-penalty", "repeat_penalty",
       "Divide a positive logit (multiply a negative one) of every token among the last --repeat-last-n by this "
       "(1: off)",
       &S::repeat_penalty, 0, 100, true, ""},
      {"repeat-last-n", "repeat_last_n", "Tokens the repetition penalty looks back over, prompt included (0: none, "
       "-1: the whole context)", &S::repeat_last_n, -1, kIntMax, false, ""},
      {"seed", "seed", "Sampling seed (the same seed gives the same tokens)", &S::seed, 0,
       static_cast<double>(std::numeric_limits<int64_t>::max()), false, ""},
  };
  return t;
}

std::string SamplingOptionValue(const SamplingOptionSpec& s, const SamplingOptions& o) {
  std::ostringstream out;
  std::visit([&](auto field) { out << o.*field; }, s.field);
  return out.str();
}

std::string SamplingOptionRange(const SamplingOptionSpec& s) {
  std::ostringstream r;
  r << (s.lo_open ? "(" : "[");
  if (s.integer()) r << s.int_lo() << ", " << s.int_hi();
  else r << s.lo << ", " << s.hi;
  r << "]";
  return r.str();
}

}  // namespace kvtrim
