#include "kvtrim/eval_heatmap.h"

#include "eval/gnuplot.h"

#include <sys/wait.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace kvtrim::eval {

namespace {

}  // namespace

std::string HeatmapScript(const Heatmap& h, const std::string& terminal) {
  std::ostringstream os;
  os << "# " << h.title << ": rows = " << h.y_label << ", columns = " << h.x_label << "\n"
     << "# Re-render: cd into this directory and run: gnuplot plot_" << h.name << ".gp\n"
     << "set terminal " << terminal << " size " << 160 + 70 * h.cols << "," << 140 + 60 * h.rows << "\n"
     << "set output " << GnuplotQuote(h.name + ".png") << "\n"
     << "set title " << GnuplotQuote(h.title) << "\n"
     << "set xlabel " << GnuplotQuote(h.x_label) << "\nset ylabel " << GnuplotQuote(h.y_label) << "\n"
     << "set xrange [-0.5:" << h.cols - 0.5 << "]\nset yrange [-0.5:" << h.rows - 0.5 << "]\n"
     << "set xtics 1\nset ytics 1\nset cbrange [0:*]\nset palette defined (0 'white', 1 '#fdae61', 2 '#d7191c')\n"
     << "unset key\n";
  int obj = 1;
  for (int r = 0; r < h.rows; ++r)
    for (int c = 0; c < h.cols; ++c)
      if (!h.marked.empty() && h.marked[static_cast<size_t>(r) * h.cols + c])
        os << "set object " << obj++ << " rect from " << c - 0.5 << "," << r - 0.5 << " to " << c + 0.5 << ","
           << r + 0.5 << " front fillstyle empty border lc rgb 'black' lw 3\n";
  os << "plot " << GnuplotQuote(h.name + ".dat") << " matrix with image, '' matrix using 1:2:(sprintf('%.3f', $3)) "
     << "with labels font ',9'\n";
  return os.str();
}

Expected<std::vector<std::string>> WriteHeatmap(const Heatmap& h, const std::string& dir) {
  if (h.rows <= 0 || h.cols <= 0 || h.values.size() != static_cast<size_t>(h.rows) * h.cols)
    return MakeError("heatmap '" + h.name + "': " + std::to_string(h.values.size()) + " values for " +
                     std::to_string(h.rows) + " x " + std::to_string(h.cols));
  auto term = PickPngTerminal();
  if (!term.ok()) return term.error();
  const std::string dat = dir + "/" + h.name + ".dat", gp = "plot_" + h.name + ".gp";
  {
    std::ofstream f(dat);
    if (!f) return MakeError("cannot write " + dat);
    f << "# " << h.title << ": one row per " << h.y_label << ", one column per " << h.x_label << "\n";
    for (int r = 0; r < h.rows; ++r) {
      for (int c = 0; c < h.cols; ++c) f << (c ? " " : "") << h.values[static_cast<size_t>(r) * h.cols + c];
      f << "\n";
    }
  }
  {
    std::ofstream f(dir + "/" + gp);
    if (!f) return MakeError("cannot write " + dir + "/" + gp);
    f << HeatmapScript(h, term.value());
  }
  KVTRIM_RETURN_IF_ERROR(RunGnuplot(dir, gp));
  return std::vector<std::string>{dat, dir + "/" + gp, dir + "/" + h.name + ".png"};
}

}  // namespace kvtrim::eval
