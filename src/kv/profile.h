// Scoring the RazorAttention probe's attention rows (ProbeScorer), the
// model identity's hash and the profile's JSON; the profile itself is part
// of the public API (kvtrim/profile.h).
#pragma once
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "kv/attention_tap.h"
#include "kvtrim/profile.h"
#include "kvtrim/status.h"

namespace kvtrim::io {
class GgufFile;
}

namespace kvtrim::kv {

// FNV-1a over the GGUF metadata (keys, types, values; not the tensors):
// same file contents, same hash, whatever the file is called.
std::string ModelMetadataHash(const io::GgufFile& f);

// The profile as JSON (format "kvtrim-profile", version kProfileVersion),
// and back: checks version, shapes and ranges; names the problem.
nlohmann::json ProfileToJson(const ModelProfile& p);
Expected<ModelProfile> ProfileFromJson(const nlohmann::json& j);

// Collects echo and induction scores from the probe's attention rows: a query
// at position i >= 1 + K (repeats 2..) puts weight p[i - K] on the previous
// occurrence of its token (echo) and p[i - K + 1] on the token after it
// (induction). Scores are averages over those queries, per query head.
class ProbeScorer : public AttentionTap {
 public:
  ProbeScorer(int n_layer, int n_head_kv, int group, int probe_len);
  void OnBatch(int pos0, int /*T*/) override { pos0_ = pos0; }
  bool WantsProbs(int) const override { return true; }
  // A query's echo entry j and induction entry j + 1 may lie in different
  // tiles: each is added from the tile that holds it, and the query is
  // counted once, from the tile holding j, when j + 1 is visible to it.
  void OnProbTile(int layer, int kv_head, const ProbTile& tile) override;
  // Row convenience (tests): query t's rows for g = 0..G-1 in order.
  void OnProbs(int layer, int kv_head, int t, int g, const float* p, int n);
  // Averages, [n_layer * n_head] (query head = kv_head * group + g).
  std::vector<double> echo() const;
  std::vector<double> induction() const;

 private:
  int n_layer_, n_head_kv_, group_, K_;
  int pos0_ = 0;
  std::vector<double> echo_, ind_;
  std::vector<int64_t> count_;
  RowsToTile rows_;
};

}  // namespace kvtrim::kv
