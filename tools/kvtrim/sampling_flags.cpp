#include "sampling_flags.h"

#include <type_traits>

#include "kvtrim/sampling.h"

namespace kvtrim::cli {

namespace {

// The row's range as a CLI check, in the words the server uses.
CLI::Validator RangeOf(const SamplingOptionSpec& s) {
  const std::string range = SamplingOptionRange(s);
  return CLI::Validator(
      [lo = s.lo, hi = s.hi, open = s.lo_open, range](std::string& v) -> std::string {
        double x = 0;
        if (!CLI::detail::lexical_cast(v, x)) return v + " is not a number";
        return (open ? x > lo : x >= lo) && x <= hi ? std::string() : v + " is outside " + range;
      },
      range);
}

}  // namespace

void AddSamplingFlags(CLI::App* sub, SamplingOptions* s) {
  for (const SamplingOptionSpec& spec : SamplingOptionTable()) {
    std::string help = spec.help;
    if (!spec.llama_cpp.empty()) help += "; llama.cpp's default: " + spec.llama_cpp;
    CLI::Option* o = std::visit(
        [&](auto field) { return sub->add_option("--" + spec.flag, s->*field, help)->capture_default_str(); },
        spec.field);
    o->check(RangeOf(spec))->group("Sampling (penalty, top-k, top-p, min-p, temperature: llama.cpp's order)");
  }
}

}  // namespace kvtrim::cli
