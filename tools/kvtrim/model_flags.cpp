#include "model_flags.h"

#include <cstdio>

#include "checks.h"

namespace kvtrim::cli {

void AddRopeFlags(CLI::App* sub, RopeOverrides* r) {
  sub->add_option("--rope-scaling", r->scaling,
                  "RoPE frequency scaling: none, linear or yarn (overrides the file's rope.scaling.type)")
      ->check(CLI::IsMember({"none", "linear", "yarn"}))
      ->group("RoPE (as llama.cpp)");
  sub->add_option("--rope-scale", r->scale,
                  "RoPE context scaling factor F: the context grows by F (overrides rope.scaling.factor)")
      ->check(Positive())
      ->group("RoPE (as llama.cpp)");
  sub->add_option("--rope-freq-base", r->freq_base, "RoPE base frequency (overrides rope.freq_base)")
      ->check(Positive())
      ->group("RoPE (as llama.cpp)");
  sub->add_option("--yarn-orig-ctx", r->yarn_orig_ctx,
                  "YaRN: the model's original (trained) context (overrides rope.scaling.original_context_length)")
      ->check(Positive())
      ->group("RoPE (as llama.cpp)");
}

CLI::Option* AddCtxFlag(CLI::App* sub, int* ctx, const std::string& help) {
  return sub->add_option("-c,--ctx,--ctx-size", *ctx, help)->capture_default_str()->check(NonNegative());
}

std::unique_ptr<Engine> LoadEngine(const char* cmd, const std::string& model, int threads, const RopeOverrides& rope,
                                   int ctx) {
  auto e = Engine::Load({model, threads, rope, ctx});
  if (!e.ok()) {
    std::fprintf(stderr, "kvtrim %s: %s\n", cmd, e.error().message.c_str());
    return nullptr;
  }
  const Engine& en = *e.value();
  if (ctx > en.trained_context_length() && !en.rope_scaled())
    std::fprintf(stderr, "kvtrim %s: warning: context %d is past the model's trained context %d and positions are "
                 "not scaled (add --rope-scaling yarn --rope-scale %d --yarn-orig-ctx %d)\n", cmd, ctx,
                 en.trained_context_length(), (ctx + en.trained_context_length() - 1) / en.trained_context_length(),
                 en.trained_context_length());
  return std::move(e.value());
}

}  // namespace kvtrim::cli
