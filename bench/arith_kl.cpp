// What the prefill's attention arithmetic costs in the model's output: the
// KL of every position's next-token distribution with the attention tiles
// in bf16 (--bf16-attention all) against f32 (off), and the two forwards'
// wall time, on the golden prompt and on prose prompts of given lengths.
//
//   kvtrim_arith_kl MODEL HAYSTACK THREADS YARN_SCALE GOLDEN_PROMPT_FILE LENGTHS...
//
// YARN_SCALE 0 keeps the model's RoPE; F > 0 runs YaRN x F over the
// model's trained context (the eval's long-context flags). GOLDEN_PROMPT_FILE
// "-": none. One JSON line per prompt on stdout: tokens, mean and worst KL
// (nats), the share of positions whose top token differs, the largest
// logit difference at the last position (what the goldens check), seconds
// of each forward.
#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/engine_impl.h"
#include "eval/metrics.h"
#include "io/tokenizer.h"
#include "kvtrim/engine.h"

using namespace kvtrim;
using Clock = std::chrono::steady_clock;

namespace {

std::string ReadFile(const char* path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Every position's logits [tokens, vocab] and the forward's seconds.
Expected<std::vector<float>> Logits(Engine& e, const std::vector<int>& toks, const char* mode, double* seconds) {
  SessionOptions so;
  so.kv.bf16_attention = mode;
  auto s = Session::Create(e, so);
  if (!s.ok()) return s.error();
  const auto t0 = Clock::now();
  auto all = s.value()->ForwardAll(toks);
  *seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return all;
}

int Report(Engine& e, const std::string& name, const std::vector<int>& toks) {
  double s_off = 0, s_all = 0;
  auto off = Logits(e, toks, "off", &s_off);
  auto all = Logits(e, toks, "all", &s_all);
  if (!off.ok() || !all.ok()) {
    std::fprintf(stderr, "%s\n", (!off.ok() ? off.error() : all.error()).message.c_str());
    return 1;
  }
  const size_t T = toks.size(), V = off.value().size() / T;
  double kl = 0, worst = 0;
  size_t flips = 0;
  for (size_t t = 0; t < T; ++t) {
    const float *p = &off.value()[t * V], *q = &all.value()[t * V];
    const double k = eval::KlDivergence(p, q, V);
    kl += k / T, worst = std::max(worst, k);
    flips += std::max_element(p, p + V) - p != std::max_element(q, q + V) - q;
  }
  // The largest logit difference at the last position, over the vocabulary
  // and over f32's top 10 (what the goldens check).
  const float *lp = &off.value()[(T - 1) * V], *lq = &all.value()[(T - 1) * V];
  double last = 0, top10 = 0;
  for (size_t v = 0; v < V; ++v) last = std::max<double>(last, std::abs(lp[v] - lq[v]));
  std::vector<size_t> order(V);
  for (size_t v = 0; v < V; ++v) order[v] = v;
  std::partial_sort(order.begin(), order.begin() + std::min<size_t>(10, V), order.end(),
                    [&](size_t a, size_t b) { return lp[a] > lp[b]; });
  for (size_t i = 0; i < std::min<size_t>(10, V); ++i) top10 = std::max<double>(top10, std::abs(lp[order[i]] - lq[order[i]]));
  std::printf(
      "{\"prompt\": \"%s\", \"tokens\": %zu, \"mean_kl\": %.4g, \"worst_kl\": %.4g, \"top1_flips\": %.4g, "
      "\"last_max_logit_diff\": %.4g, \"last_top10_logit_diff\": %.4g, \"f32_s\": %.3f, \"bf16_s\": %.3f}\n",
      name.c_str(), T, kl, worst, static_cast<double>(flips) / T, last, top10, s_off, s_all);
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s MODEL HAYSTACK THREADS YARN_SCALE GOLDEN_PROMPT_FILE LENGTHS...\n", argv[0]);
    return 2;
  }
  const double yarn = std::atof(argv[4]);
  int longest = 0;
  for (int i = 6; i < argc; ++i) longest = std::max(longest, std::atoi(argv[i]));
  EngineOptions eo(argv[1], std::atoi(argv[3]));
  if (yarn > 0) eo.rope = {"yarn", yarn, 0, 0}, eo.ctx = longest + 8;
  auto e = Engine::Load(eo);
  if (!e.ok()) return std::fprintf(stderr, "%s\n", e.error().message.c_str()), 1;
  const io::Tokenizer& tok = e.value()->impl().tokenizer();
  if (std::string(argv[5]) != "-")
    if (int rc = Report(*e.value(), "golden", tok.Encode(ReadFile(argv[5]), true))) return rc;
  const std::vector<int> prose = tok.Encode(ReadFile(argv[2]).substr(10000, 400000), true);
  for (int i = 6; i < argc; ++i) {
    const size_t n = std::min<size_t>(std::atoi(argv[i]), prose.size());
    if (int rc = Report(*e.value(), "prose-" + std::to_string(n), {prose.begin(), prose.begin() + n})) return rc;
  }
  return 0;
}
