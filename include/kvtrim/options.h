// Options structs of the public API.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace kvtrim {

// RoPE settings that override the model file's {arch}.rope.* keys, spelled
// as llama.cpp's flags (--rope-scaling, --rope-scale, --rope-freq-base,
// --yarn-orig-ctx). Empty / 0: the file's value stays.
struct RopeOverrides {
  std::string scaling;     // "none", "linear" or "yarn"
  double scale = 0;        // the context scaling factor F (positions / F)
  double freq_base = 0;    // RoPE base theta
  int yarn_orig_ctx = 0;   // YaRN's original (trained) context
  bool any() const { return !scaling.empty() || scale != 0 || freq_base != 0 || yarn_orig_ctx != 0; }
};

struct EngineOptions {
  // A constructor (not an aggregate) so that {path, threads} stays complete
  // under -Wmissing-field-initializers.
  EngineOptions(std::string path = "", int threads_ = 0, RopeOverrides rope_ = {}, int ctx_ = 0)
      : model_path(std::move(path)), threads(threads_), rope(std::move(rope_)), ctx(ctx_) {}
  std::string model_path;
  int threads = 0;  // 0: all cores
  RopeOverrides rope;
  // The context every session may use (0: the file's context_length). Past
  // the trained context, positions need RoPE scaling (`rope`) to mean much.
  int ctx = 0;
};

// KV-cache compression: a policy from the registry (`kvtrim policies`), its
// budget, and the storage of what is kept.
struct KvOptions {
  std::string policy = "full";
  std::map<std::string, double> params;  // the policy's own flags
  double ratio = 1.0;        // retention ratio in (0, 1] ...
  // The ratio was asked for (--kv-ratio, every eval cell): a policy with a
  // sizing rule of its own (razor's --compress-factor) follows it then, and
  // ratio 1 keeps everything; otherwise that rule applies.
  bool ratio_explicit = false;
  int budget_tokens = 0;     // ... or a per-head token budget (> 0 wins)
  std::string quant = "f32";  // entries stored as f32, f16, q8_0 or q4_0
  // When entries take that type: "write" (as they are written, from the
  // prefill's first batch on, so the peak follows the type; a batch's own
  // keys and values are attended in f32 while it is computed), or "kept"
  // (computed and compressed in f32, then what is kept is quantized:
  // METHODS.md section 6's order, the eval's reference).
  std::string quant_at = "write";
  // Whether entries are stored rotated (a randomized Walsh-Hadamard
  // transform of each key and value, the query rotated to match and the
  // output rotated back, so attention is unchanged in exact arithmetic):
  // "auto" (for q8_0 and q4_0 storage, where it spreads outlier channels
  // over their block before quantization), "on" (every type) or "off".
  std::string rotate = "auto";
  std::string profile;        // model profile file (razor); empty: profiled in-process once per Engine
  // Nonuniform per-head budgets from the profile's head_budgets (kvtrim
  // profile --head-budgets), scaled to the ratio: 1 on (an error when the
  // profile has none), 0 off, -1 auto: on for `am` with a --profile that has them.
  int head_budgets = -1;
  // How a layer's budget is shared by its KV heads: "uniform" (each the same,
  // or the profile's head_budgets above), or "adaptive" (AdaKV: one top-k
  // over the layer's normalised entry scores, each head at least
  // min_head_share of the uniform share; policies that score entries only).
  std::string head_budget = "uniform";
  double min_head_share = 0.2;
  // Threshold eviction (--kv-threshold T > 0): each head keeps the entries
  // whose normalised score exceeds T times the head's mean (T = 1: the
  // entries above average; budget::ThresholdHeadBudgets), plus those the policy protects,
  // after the prefill and at every decode step; the ratio is not used, so
  // the total follows the context. Policies that score entries only; 0: off.
  double threshold = 0;
  // Context-calibrated compression: with quality > 0 the ratio is chosen per
  // context at Compress() as r* for this quality target (in (0, 1]) from the
  // policy's fit in the `kvtrim calibrate` file `calibration`.
  double quality = 0;
  std::string calibration;
  // Verify every compressed head (finite keys/values, no NaN log-weight) and
  // name the policy that broke it; always on in debug builds (no NDEBUG).
  bool check_finite = false;
  // Chunked prefill that compresses as it goes (--prefill-chunk N): the
  // prompt is prefilled N tokens at a time and after every chunk but the
  // last each head is brought back within its budget for the whole prompt,
  // so no head holds more than budget + N entries; the last chunk is
  // compressed by Session::Compress as a one-shot prefill is. 0: off (the
  // whole prompt, then compression). Policies that cannot stream refuse it
  // (Policy::StreamBlocker, `kvtrim policies`).
  int prefill_chunk = 0;
  // Prefill attention's tile products (Q K^T and P V) in bf16 with f32 sums
  // where the CPU has AVX512-BF16 (elsewhere f32 whatever this says):
  // "pass" (only the reference pass of am, kvzip and kvzip-am, whose
  // attention serves scores that rank entries), "all" (the prefill too) or
  // "off" (f32 everywhere, the reference arithmetic). Decode stays f32.
  std::string bf16_attention = "pass";
};

struct SessionOptions {
  int ctx = 0;             // 0: the model's trained context length
  int ubatch = 512;        // prefill tokens per forward call
  KvOptions kv;
  // Also collect the statistics these policies need, so the session can be
  // forked into any of them after prefill (Session::Fork).
  std::vector<KvOptions> fork_targets;
  // Chunked prefill (KvOptions::prefill_chunk): called after every chunk
  // but the last has been compressed, with the tokens prefilled so far and
  // the prompt's length (progress on long prompts; tests check the heads).
  std::function<void(int64_t done, int64_t total)> on_chunk;
};

// Sampling, applied in llama.cpp's default chain order: repetition penalty
// over the last repeat_last_n tokens, top-k, top-p, min-p (each on the
// temperature-1 distribution of the tokens still in), then temperature and
// a seeded draw (greedy at temp 0). The fields, their flags, request fields
// and ranges are declared once in kvtrim/sampling.h.
struct SamplingOptions {
  float temp = 0.8f;  // 0: greedy
  float top_p = 0.9f;  // 1: off
  uint64_t seed = 42;
  bool ignore_eos = false;  // keep generating past EOS/BOS (fixed-length runs)
  std::vector<int> stop_ids = {};  // more tokens that end generation (e.g. EOT), unless ignore_eos
  int top_k = 40;                  // 0: off (llama.cpp's default 40)
  float min_p = 0.f;               // 0: off (llama.cpp's default is 0.05)
  float repeat_penalty = 1.f;      // 1: off; a seen token's logit is divided (> 0) or multiplied (< 0) by it
  int repeat_last_n = 64;          // tokens the penalty looks back over (0: none)
};

}  // namespace kvtrim
