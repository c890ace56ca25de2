// Running gnuplot for the report plots (eval, profile heatmaps, calibration):
// quoting, picking a PNG terminal, and rendering a script inside a folder.
#pragma once
#include <string>

#include "kvtrim/status.h"

namespace kvtrim::eval {

std::string GnuplotQuote(const std::string& s);  // gnuplot single-quoted string
std::string ShellQuote(const std::string& s);    // POSIX shell single-quoted string
// "pngcairo" when gnuplot has it, else "png"; an error when gnuplot is missing.
Expected<std::string> PickPngTerminal();
// Runs `gnuplot script` inside dir; the error carries gnuplot's output.
Status RunGnuplot(const std::string& dir, const std::string& script);

}  // namespace kvtrim::eval
