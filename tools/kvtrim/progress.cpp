#include "progress.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>

namespace kvtrim::cli {

std::function<void(int, int)> CountProgress(std::string command, std::string unit) {
  constexpr double kLogEvery = 60.0;
  const bool tty = isatty(fileno(stderr));
  auto start = std::chrono::steady_clock::now();
  auto last = std::make_shared<double>(0.0);
  return [=](int done, int total) {
    double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double eta = done > 0 ? el / done * (total - done) : 0;
    if (!tty) {
      if (el - *last < kLogEvery || done == total) return;
      *last = el;
      std::fprintf(stderr, "%s: %d/%d %s, %.0f s, ETA %.0f s\n", command.c_str(), done, total, unit.c_str(), el, eta);
      std::fflush(stderr);
      return;
    }
    int w = 30, fill = total > 0 ? w * done / total : w;
    std::fprintf(stderr, "\r[%s%s] %d/%d %s, %.0f s, ETA %.0f s ", std::string(fill, '#').c_str(),
                 std::string(w - fill, '.').c_str(), done, total, unit.c_str(), el, eta);
    if (done == total) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  };
}

}  // namespace kvtrim::cli
