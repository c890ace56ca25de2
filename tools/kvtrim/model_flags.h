// The model-loading flags every command that loads a model shares: RoPE
// overrides spelled as llama.cpp's (--rope-scaling, --rope-scale,
// --rope-freq-base, --yarn-orig-ctx), and loading at a context past the
// trained one.
#pragma once
#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "kvtrim/engine.h"
#include "kvtrim/options.h"

namespace kvtrim::cli {

void AddRopeFlags(CLI::App* sub, RopeOverrides* r);
// -c, --ctx, --ctx-size (llama.cpp's spellings): the context length.
CLI::Option* AddCtxFlag(CLI::App* sub, int* ctx, const std::string& help);

// Loads the model for command `cmd` at context `ctx` (0: the model's): a
// context past the trained one is granted as eval and bench grant it, with
// a warning on stderr when positions are not scaled (no RoPE scaling in the
// file or the flags). Errors are printed; null then.
std::unique_ptr<Engine> LoadEngine(const char* cmd, const std::string& model, int threads, const RopeOverrides& rope,
                                   int ctx);

}  // namespace kvtrim::cli
