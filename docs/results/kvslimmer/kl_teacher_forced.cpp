// Provisional long-generation fidelity for docs/results/kvslimmer.md, until the
// eval's fidelity-decode protocol exists (not built by CMake). Per sample: BOS +
// 64 haystack tokens prefilled (and compressed), then the next C tokens
// teacher-forced one decode step at a time, so decode-time compression
// dominates; KL(full || method) of the next-token distributions averaged over
// the C positions (mean and standard error over samples) and the NLL ratio
// (summed NLL of the method / of full). Build from the repository root after
// building kvtrim:
//   g++ -std=c++20 -O2 -Iinclude -Isrc -I/usr/include/eigen3 docs/results/kvslimmer/kl_teacher_forced.cpp
//       build/libkvtrim.a -o /tmp/kl -lsleef -lpthread
//   /tmp/kl ../shared/models/needle-v1-3.7M-f32.gguf ../shared/data/frankenstein.txt 900 6 [NAME[:flag=value],...]
#include <cmath>
#include <map>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include "kvtrim/engine.h"
#include "io/tokenizer.h"
#include "kv/compressor.h"
#include "kv/cache.h"
using namespace kvtrim;
static std::vector<double> LogSoftmax(const std::vector<float>& x) {
  double m = -1e300; for (float v : x) m = std::max(m, (double)v);
  double s = 0; for (float v : x) s += std::exp(v - m);
  std::vector<double> o(x.size()); double ls = m + std::log(s);
  for (size_t i = 0; i < x.size(); ++i) o[i] = x[i] - ls;
  return o;
}
int main(int argc, char** argv) {
  auto e = Engine::Load({argv[1], 2}).value();
  std::ifstream f(argv[2]); std::stringstream ss; ss << f.rdbuf();
  auto all = e->tokenizer().Encode(ss.str(), false);
  const int P = 64, C = std::atoi(argv[3]), S = std::atoi(argv[4]);
  std::mt19937_64 rng(7);
  std::vector<std::string> methods = {"kvslimmer", "merge-mean", "h2o", "window"};
  if (argc > 5) {  // comma-separated, each NAME or NAME:flag=value
    methods.clear();
    std::stringstream ms(argv[5]); std::string t;
    while (std::getline(ms, t, ',')) methods.push_back(t);
  }
  std::vector<double> ratios = {0.5, 0.25, 0.1};
  struct Acc { double kl = 0, nll = 0, nllf = 0, ent = 0; int n = 0; std::vector<double> per; };
  std::map<std::pair<std::string, double>, Acc> acc;
  for (int s = 0; s < S; ++s) {
    size_t off = rng() % (all.size() - P - C - 1);
    std::vector<int> toks = {e->tokenizer().bos()};
    toks.insert(toks.end(), all.begin() + off, all.begin() + off + P + C);
    std::vector<int> prompt(toks.begin(), toks.begin() + P + 1);
    auto run = [&](const KvOptions& kv, double* ent) {
      SessionOptions so; so.kv = kv;
      auto ses = Session::Create(*e, so).value();
      if (!ses->Prefill(prompt).ok() || !ses->Compress().ok()) std::abort();
      std::vector<std::vector<double>> lp;
      for (int i = 0; i < C; ++i) {
        lp.push_back(LogSoftmax(ses->logits()));
        if (i + 1 < C && !ses->Decode(toks[P + 1 + i]).ok()) std::abort();
      }
      const size_t held = ses->cache().EntriesHeld();
      if (ent) *ent = double(held) / (ses->cache().n_layer() * ses->cache().n_head_kv());
      return lp;
    };
    auto full = run({}, nullptr);
    double nf = 0; for (int i = 0; i < C; ++i) nf -= full[i][toks[P + 1 + i]];
    for (auto& m : methods) for (double r : ratios) {
      KvOptions kv; kv.ratio = r; double ent;
      auto colon = m.find(':');
      kv.policy = m.substr(0, colon);
      if (colon != std::string::npos) {
        auto eq = m.find('=', colon);
        kv.params[m.substr(colon + 1, eq - colon - 1)] = std::atof(m.c_str() + eq + 1);
      }
      auto lp = run(kv, &ent);
      double kl = 0, nl = 0;
      for (int i = 0; i < C; ++i) {
        double k = 0; for (size_t v = 0; v < lp[i].size(); ++v) k += std::exp(full[i][v]) * (full[i][v] - lp[i][v]);
        kl += k; nl -= lp[i][toks[P + 1 + i]];
      }
      Acc& a = acc[{m, r}]; a.per.push_back(kl / C); a.nll += nl; a.nllf += nf; a.ent += ent; a.n++;
    }
    std::fprintf(stderr, "sample %d done\n", s);
  }
  std::printf("%-11s %5s %10s %8s %10s %12s\n", "method", "ratio", "KL", "KL se", "NLL ratio", "ent/head end");
  for (auto& m : methods) for (double r : ratios) {
    Acc& a = acc[{m, r}]; double mean = 0; for (double x : a.per) mean += x; mean /= a.n;
    double v = 0; for (double x : a.per) v += (x - mean) * (x - mean);
    double se = a.n > 1 ? std::sqrt(v / (a.n - 1) / a.n) : 0;
    std::printf("%-11s %5.2f %10.4f %8.4f %10.4f %12.1f\n", m.c_str(), r, mean, se, a.nll / a.nllf, a.ent / a.n);
  }
}
