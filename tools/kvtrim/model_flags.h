// The model-loading flags every command that loads a model shares: RoPE
// overrides spelled as llama.cpp's (--rope-scaling, --rope-scale,
// --rope-freq-base, --yarn-orig-ctx).
#pragma once
#include <CLI/CLI.hpp>

#include "kvtrim/options.h"

namespace kvtrim::cli {

void AddRopeFlags(CLI::App* sub, RopeOverrides* r);

}  // namespace kvtrim::cli
