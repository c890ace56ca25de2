// Value checks of the CLI's numeric flags, with messages in the user's
// terms ("gl is not a number", "-3 is below 0"): CLI11's NonNegativeNumber
// is a range up to DBL_MAX, which it prints in full (309 digits).
#pragma once
#include <CLI/CLI.hpp>
#include <string>

namespace kvtrim::cli {

CLI::Validator AtLeast(double lo, bool open);
inline CLI::Validator NonNegative() { return AtLeast(0, false); }
inline CLI::Validator Positive() { return AtLeast(0, true); }

}  // namespace kvtrim::cli
