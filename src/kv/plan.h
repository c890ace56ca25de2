// A plan: what a policy wants done to one (layer, KV head). Policies return
// plans; only the cache applies them (STYLE.md practice 1).
#pragma once
#include <cstdint>
#include <vector>

namespace kvtrim::kv {

struct SyntheticEntry {  // a new entry computed by the policy (compensation, fitted)
  std::vector<float> k, v;  // [d] post-RoPE key, value
  int32_t pos = 0;
  float logw = 0.f;
};

// Several entries become one (METHODS.md section 0). With cardinalities
// c_i = exp(b_i): key = sum_i w_i k_i (w = key_weights, or c_i / sum c if
// empty), value = sum_i c_i v_i / sum c_i, b = log sum c_i, position = the
// cardinality-weighted mean position.
struct MergeEntry {
  std::vector<int> sources;        // original indices, none of them kept
  std::vector<float> key_weights;  // one per source, or empty
};

// Output entries are ordered by position: kept entries, merged entries (at
// their representative position) and synthetic ones, so "most recent" stays
// "last" for every policy.
struct Plan {
  bool noop = true;            // leave the head as it is
  std::vector<int> keep;       // entries kept, increasing indices
  std::vector<MergeEntry> merge;
  std::vector<SyntheticEntry> add;
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
