// Options structs of the public API.
#pragma once
#include <cstdint>
#include <string>

namespace kvtrim {

struct EngineOptions {
  std::string model_path;
  int threads = 0;  // 0: all cores
};

struct SessionOptions {
  int ctx = 0;             // 0: the model's trained context length
  int ubatch = 512;        // prefill tokens per forward call
  std::string kv_type = "f32";  // storage of kept entries: f32, f16, q8_0, q4_0
};

struct SamplingOptions {
  float temp = 0.8f;  // 0: greedy
  float top_p = 0.9f;
  uint64_t seed = 42;
};

}  // namespace kvtrim
