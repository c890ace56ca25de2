#include "model_flags.h"

namespace kvtrim::cli {

void AddRopeFlags(CLI::App* sub, RopeOverrides* r) {
  sub->add_option("--rope-scaling", r->scaling,
                  "RoPE frequency scaling: none, linear or yarn (overrides the file's rope.scaling.type)")
      ->check(CLI::IsMember({"none", "linear", "yarn"}))
      ->group("RoPE (as llama.cpp)");
  sub->add_option("--rope-scale", r->scale,
                  "RoPE context scaling factor F: the context grows by F (overrides rope.scaling.factor)")
      ->check(CLI::PositiveNumber)
      ->group("RoPE (as llama.cpp)");
  sub->add_option("--rope-freq-base", r->freq_base, "RoPE base frequency (overrides rope.freq_base)")
      ->check(CLI::PositiveNumber)
      ->group("RoPE (as llama.cpp)");
  sub->add_option("--yarn-orig-ctx", r->yarn_orig_ctx,
                  "YaRN: the model's original (trained) context (overrides rope.scaling.original_context_length)")
      ->check(CLI::PositiveNumber)
      ->group("RoPE (as llama.cpp)");
}

}  // namespace kvtrim::cli
