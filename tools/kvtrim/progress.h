// Progress of a long CLI job (eval, calibrate) on stderr.
#pragma once

#include <functional>
#include <string>

namespace kvtrim::cli {

// A callback taking (done, total). On a terminal: a bar redrawn in place.
// Otherwise (a log file, a pipe): one plain line at most every 60 seconds,
// "<command>: done/total <unit>, elapsed, ETA", so a long run shows it is
// alive without filling the log.
std::function<void(int, int)> CountProgress(std::string command, std::string unit);

}  // namespace kvtrim::cli
