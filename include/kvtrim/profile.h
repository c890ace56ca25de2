// A model's attention profile (RazorAttention, METHODS.md section 2): echo and
// induction scores per (layer, query head) from the repeated-random-block
// probe, the retrieval query heads and KV heads chosen from them, and the
// model it belongs to. Saved as versioned JSON; readers keep fields they do
// not know (later methods add e.g. `head_budgets`). Running the probe needs
// the model (kvtrim/engine.h: ProfileModel); scoring the probe's attention
// rows lives in src/kv/profile.h.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kvtrim/status.h"

namespace kvtrim {

inline constexpr int kProfileVersion = 1;

// Which model a profile was made from. A profile is accepted for a model only
// when size and hash agree (the file name is informative only).
struct ModelId {
  std::string file;            // file name, without directories
  uint64_t size = 0;           // bytes
  std::string metadata_hash;   // 16 hex digits: a hash of the file's metadata (Engine::model_id)
  bool operator==(const ModelId&) const = default;
};

// Retrieval heads chosen from the scores (METHODS.md section 2).
struct RetrievalHeads {
  std::vector<int> query;      // flat query-head indices l * n_head + h, increasing
  std::vector<char> kv;        // [n_layer * n_head_kv] 1: retrieval KV head (GQA promotion)
  int n_echo = 0, n_induction = 0;  // heads taken from each ranking
  double f_ret = 0;            // fraction of KV heads that are retrieval heads
};

// The union of the top `echo_frac` of query heads by echo score and the top
// `induction_frac` by induction score, each ranked over all (layer, head)
// pairs and each ceil(frac * count), at least one head; ties go to the lower
// index. A KV head is retrieval when any query head of its group is.
RetrievalHeads SelectRetrievalHeads(const std::vector<double>& echo, const std::vector<double>& induction, int n_layer,
                                    int n_head, int n_head_kv, double echo_frac, double induction_frac);

struct ModelProfile {
  int version = kProfileVersion;
  ModelId model;
  int n_layer = 0, n_head = 0, n_head_kv = 0, ctx = 0;
  // Probe: BOS + `repeats` copies of a block of probe_len random ids.
  int probe_len = 0, repeats = 4;
  uint64_t seed = 0;
  double seconds = 0;                 // time the probe took
  std::vector<double> echo, induction;  // [n_layer * n_head]
  double echo_frac = 0.01, induction_frac = 0.14;
  RetrievalHeads heads;               // for the fractions above
  // Fields this version does not know, each as its JSON text, kept on
  // rewrite (a later method's: the head budgets, kHeadBudgetsKey).
  std::map<std::string, std::string> extra;

  double echo_at(int l, int h) const { return echo[static_cast<size_t>(l) * n_head + h]; }
  double induction_at(int l, int h) const { return induction[static_cast<size_t>(l) * n_head + h]; }
};

Status WriteProfile(const std::string& path, const ModelProfile& p);
Expected<ModelProfile> ReadProfile(const std::string& path);
// A profile is for this model: same size and hash, same head layout.
Status CheckProfileFor(const ModelProfile& p, const ModelId& id, int n_layer, int n_head, int n_head_kv);

// Fewest entries razor can hold for a sequence of n tokens with this
// profile: retrieval KV heads whole, every other `sinks + min_window + 1`,
// as a fraction of the full cache (METHODS.md section 2).
double MinReachableRatio(const RetrievalHeads& h, int64_t n, int sinks, int min_window);

}  // namespace kvtrim
