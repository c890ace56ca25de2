#include "eval/gnuplot.h"

#include <sys/wait.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace kvtrim::eval {
namespace {

std::string Quote(const std::string& s, const std::string& escaped_quote) {
  std::string out = "'";
  for (char ch : s) out += (ch == '\'') ? escaped_quote : std::string(1, ch);
  return out + "'";
}

}  // namespace

std::string GnuplotQuote(const std::string& s) { return Quote(s, "''"); }
std::string ShellQuote(const std::string& s) { return Quote(s, "'\\''"); }

Expected<std::string> PickPngTerminal() {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0)
    return MakeError("gnuplot is missing from PATH; install it (e.g. `apt-get install gnuplot-nox`)");
  if (std::system("gnuplot -e 'set terminal pngcairo' >/dev/null 2>&1") == 0) return std::string("pngcairo");
  return std::string("png");
}

Status RunGnuplot(const std::string& dir, const std::string& script) {
  const std::string cmd = "cd " + ShellQuote(dir) + " && gnuplot " + ShellQuote(script) + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return MakeError("cannot run gnuplot: " + std::string(std::strerror(errno)));
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof(buf), pipe)) out += buf;
  const int st = pclose(pipe);
  if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
    return MakeError("gnuplot failed on " + dir + "/" + script + ": " + out);
  return {};
}

}  // namespace kvtrim::eval
