#include "checks.h"

#include <cstdio>

namespace kvtrim::cli {

CLI::Validator AtLeast(double lo, bool open) {
  char bound[32];
  std::snprintf(bound, sizeof bound, "%g", lo);
  const std::string b = bound;
  return CLI::Validator(
      [lo, open, b](std::string& v) -> std::string {
        double x = 0;
        if (!CLI::detail::lexical_cast(v, x)) return v + " is not a number";
        if (open ? !(x > lo) : !(x >= lo)) return v + (open ? " must be above " : " is below ") + b;
        return {};
      },
      open ? "> " + b : ">= " + b);
}

}  // namespace kvtrim::cli
