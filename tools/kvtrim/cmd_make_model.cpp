// `kvtrim make-model`: a GGUF file at the published shape of a real model,
// with seeded noise for weights (model/shape_models.h, docs/shape-models.md).
#include <cstdio>
#include <functional>
#include <memory>

#include "commands.h"
#include "kvtrim/shape_model.h"

namespace kvtrim::cli {
namespace {

struct MakeModelFlags {
  ShapeModelOptions opts;
  std::string out;
  bool quiet = false;
};

// One stderr line per tenth of the file written.
std::function<void(uint64_t, uint64_t)> TenthsProgress(bool quiet) {
  auto last = std::make_shared<int>(0);
  return [quiet, last](uint64_t written, uint64_t total) {
    const int tenth = static_cast<int>(written * 10 / (total ? total : 1));
    if (quiet || tenth <= *last) return;
    *last = tenth;
    std::fprintf(stderr, "kvtrim make-model: %.1f of %.1f MiB written (%d%%)\n", written / 1048576.0,
                 total / 1048576.0, tenth * 10);
  };
}

int MakeModel(const MakeModelFlags& f) {
  auto w = WriteShapeModel(f.opts, f.out, TenthsProgress(f.quiet));
  if (!w.ok()) {
    std::fprintf(stderr, "kvtrim make-model: %s\n", w.error().message.c_str());
    return 1;
  }
  std::printf("wrote %s: shape %s, type %s, seed %llu, %zu tensors, %llu bytes in %.1f s (weights are noise: for "
              "speed and memory measurements only)\n",
              f.out.c_str(), f.opts.shape.c_str(), f.opts.type.c_str(), static_cast<unsigned long long>(f.opts.seed),
              w.value().tensors, static_cast<unsigned long long>(w.value().bytes), w.value().seconds);
  return 0;
}

}  // namespace

Command AddMakeModel(CLI::App& app) {
  auto f = std::make_shared<MakeModelFlags>();
  CLI::App* sub = app.add_subcommand(
      "make-model",
      "Write a GGUF model with the published configuration of a real model and seeded random weights. "
      "THE WEIGHTS ARE NOISE: the file is for speed and memory measurements only, never for quality. "
      "Matrices and token_embd use --type; norms, biases and rope_freqs stay F32. The vocabulary is synthetic "
      "(SentencePiece pieces and byte fallback) at the real size. Shapes: " + ModelShapeNames());
  sub->add_option("--shape", f->opts.shape, "Published shape: " + ModelShapeNames())->required();
  sub->add_option("--type", f->opts.type, "Weight type: f16, q8_0 or q4_0")->capture_default_str();
  sub->add_option("--seed", f->opts.seed, "Seed of the noise (one seed: byte-identical files)")->capture_default_str();
  sub->add_option("--out", f->out, "Output file (written to FILE.partial, then renamed)")->required();
  sub->add_option("--layers", f->opts.layers,
                  "Write this many layers instead of the published count (0: published); such a file deviates "
                  "from the shape, for quick tests only")
      ->capture_default_str();
  sub->add_flag("-q,--quiet", f->quiet, "No progress lines on stderr");
  return {sub, [f]() { return MakeModel(*f); }};
}

}  // namespace kvtrim::cli
