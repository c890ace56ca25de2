// A plan: what a policy wants done to one (layer, KV head). Policies return
// plans; only the cache applies them (STYLE.md practice 1).
#pragma once
#include <cstdint>
#include <vector>

namespace kvtrim::kv {

struct SyntheticEntry {  // a new entry: merged, compensation or fitted
  std::vector<float> k, v;  // [d] post-RoPE key, value
  int32_t pos = 0;
  float logw = 0.f;
};

struct Plan {
  bool noop = true;            // leave the head as it is
  std::vector<int> keep;       // entries kept, increasing indices
  std::vector<SyntheticEntry> add;  // appended after the kept entries
  // Overrides on kept entries (index into the original numbering).
  std::vector<std::pair<int, float>> set_logw;
  std::vector<std::pair<int, std::vector<float>>> set_value;
  std::vector<std::pair<int, std::vector<float>>> set_key;

  static Plan Keep(std::vector<int> keep) {
    Plan p;
    p.noop = false;
    p.keep = std::move(keep);
    return p;
  }
};

}  // namespace kvtrim::kv
