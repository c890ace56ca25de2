// Shape models (docs/shape-models.md): GGUF files at the published
// configuration of a real model with seeded noise for weights, for speed
// and memory measurements only (`kvtrim make-model`).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "kvtrim/status.h"

namespace kvtrim {

struct ShapeModelOptions {
  std::string shape;
  std::string type = "q4_0";
  uint64_t seed = 1;
  int layers = 0;  // > 0: this many layers instead of the published count (small test files)
};

// "smollm2-135m, qwen2.5-0.5b, llama3.2-1b"
std::string ModelShapeNames();

struct ShapeModelWritten {
  size_t tensors = 0;
  uint64_t bytes = 0;
  double seconds = 0;  // writing the file
};
// Writes the model to `path` (through PATH.partial, then renamed);
// `progress(written, total)` is called as the bytes go out.
Expected<ShapeModelWritten> WriteShapeModel(const ShapeModelOptions& o, const std::string& path,
                                            const std::function<void(uint64_t, uint64_t)>& progress = {});

}  // namespace kvtrim
