// Public API: load a model (Engine), run a sequence on it (Session).
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kvtrim/options.h"
#include "kvtrim/status.h"

namespace kvtrim {

struct ModelId;            // kvtrim/profile.h
struct ModelProfile;       // kvtrim/profile.h
struct StoredHeadBudgets;  // kvtrim/head_budgets.h

// The RazorAttention probe (METHODS.md section 2): BOS + 4 copies of a block
// of probe_len random ordinary token ids (0: min(2500, ctx/4 - 1)), seeded.
struct ProfileOptions {
  int probe_len = 0;
  uint64_t seed = 42;
  double echo_frac = 0.01, induction_frac = 0.14;
};

class Engine {
 public:
  static Expected<std::unique_ptr<Engine>> Load(const EngineOptions& opts);
  ~Engine();

  int threads() const;
  // The context length the model is read at (its trained one, or the one
  // given with RoPE scaling).
  int context_length() const;
  // The file's context_length, and whether positions are scaled (the file's
  // rope.scaling or the RoPE overrides): past the trained context an
  // unscaled model reads positions it never saw.
  int trained_context_length() const;
  bool rope_scaled() const;
  // File name, size and metadata hash of the model (profiles are checked against it).
  const ModelId& model_id() const;
  // The model profile in `path`, checked against this model; for an empty
  // path, the probe run in-process once (default ProfileOptions) and cached.
  // Thread-safe; errors are returned (and not cached).
  Expected<std::shared_ptr<const ModelProfile>> Profile(const std::string& path) const;

  // The library's inside: the model file, configuration, weights, tokenizer,
  // forward pass and threads (src/engine/engine_impl.h; opaque here).
  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  Engine();
  std::unique_ptr<Impl> impl_;
};

// Runs the probe on the model and scores every (layer, query head).
Expected<ModelProfile> ProfileModel(const Engine& engine, const ProfileOptions& o);

// Nonuniform head budgets (METHODS.md section 4): each KV head's sensitivity
// is the mean KL(full || compressed) of the next-token distributions over a
// teacher-forced continuation when only that head is compacted with `policy`
// (am) at each ratio of DefaultRatioGrid(ratio) and at 1 (whole), every
// other head at `ratio`; then SearchHeadBudgets on the NonIncreasing
// curves. Each context is a prefix (BOS + text) followed by `continuation`
// tokens. The policy must compact heads
// independently (not on-policy): each (head, ratio) is compacted once per
// context and the caches are assembled from those heads.
struct HeadBudgetMeasureOptions {
  double ratio = 0.1;
  KvOptions policy = [] { KvOptions k; k.policy = "am"; return k; }();  // its ratio is ignored
  int continuation = 64;
  int units_per_head = 128;
  uint64_t seed = 0;  // recorded only (the contexts carry the randomness)
};
Expected<StoredHeadBudgets> MeasureHeadBudgets(const Engine& engine, const std::vector<std::vector<int>>& contexts,
                                                   const HeadBudgetMeasureOptions& o,
                                                   const std::function<void(const std::string&)>& progress = {});
// (Its calibration contexts from a haystack: HeadBudgetContexts, kvtrim/eval_tasks.h.)

// One sequence: its KV cache, logits of the last position, timing.
class Session {
 public:
  static Expected<std::unique_ptr<Session>> Create(const Engine& engine, const SessionOptions& opts);
  ~Session();

  // Append tokens (prefill in ubatches); logits() then holds the last position's.
  // With KvOptions::prefill_chunk N > 0 the tokens go in N at a time and
  // after every chunk but the last each head is brought back within its
  // budget for the whole prompt (Compressor::CompressChunk); Compress() then
  // compresses the last chunk as it would a whole prompt.
  Status Prefill(const std::vector<int>& tokens);
  // Prefill-time compression of what is in the cache (then quantization of
  // the kept entries); a no-op for `full` with f32 storage.
  Status Compress();
  // Append one token and compute its logits; decode-time eviction follows.
  Status Decode(int token);
  // A new session holding a copy of this one's cache, statistics and logits,
  // compressing with `kv` from now on. The statistics `kv` needs must have
  // been collected here (SessionOptions::fork_targets).
  Expected<std::unique_ptr<Session>> Fork(const KvOptions& kv) const;
  // The context file (docs/context-file.md): this session's cache as it is
  // (entries in their stored type, positions, log-weights), its tokens, the
  // last logits, its KV options and the model's identity, written
  // atomically. The compressor's statistics are not saved: decode-time
  // policies start them afresh on a loaded context.
  Status SaveContext(const std::string& path) const;
  // The same context as the bytes of a context file (what SaveContext writes).
  std::string ContextBytes() const;
  // A session holding the context saved in `path`, compressing with the
  // file's KV options (opts.kv is ignored; ctx and ubatch are the caller's).
  // A file of another model (metadata hash), tokenizer, RoPE or head layout,
  // another format version, or one that is truncated or corrupt is refused
  // with an error naming the file.
  static Expected<std::unique_ptr<Session>> LoadContext(const Engine& engine, const std::string& path,
                                                        const SessionOptions& opts);
  // The same from a context file's bytes in memory (a Redis store's value);
  // errors begin with `name`.
  static Expected<std::unique_ptr<Session>> LoadContextBytes(const Engine& engine, const uint8_t* data, size_t size,
                                                             const std::string& name, const SessionOptions& opts);
  // A note of the caller's saved with the context (ContextBytes,
  // SaveContext) and restored by LoadContext: a conversation keeps its
  // messages there. Empty: none.
  void set_context_note(std::string note) { note_ = std::move(note); }
  const std::string& context_note() const { return note_; }
  // Append tokens and return the logits of every one of them: [n, vocab].
  Expected<std::vector<float>> ForwardAll(const std::vector<int>& tokens);

  // Token-averaged NLL of the tokens prefilled so far, NLL(c), computed only
  // with KvOptions::quality > 0 (NaN otherwise, or before two tokens).
  double context_nll() const;
  // The retention ratio of the last Compress(): r* with KvOptions::quality,
  // else the configured one.
  double chosen_ratio() const { return chosen_ratio_; }
  // The KV options this session compresses with (a loaded context's own).
  const KvOptions& kv_options() const;

  const std::vector<float>& logits() const { return logits_; }
  const std::vector<int>& tokens() const { return tokens_; }  // every token appended so far
  int64_t position() const;  // logical length of the cache
  // The next token's RoPE position: position() until a re-base, less after.
  int64_t rope_position() const;
  // Room for n more tokens within the context length (a conversation's
  // next turn and its answer). When they would pass it the held entries are
  // re-based (src/kv/rope_map.h): the newest quarter of the context keeps its
  // distances, everything older is squashed into the quarter before it, and
  // the keys are rotated to match, so the RoPE length falls to half the
  // context (less when n needs more). Nothing is dropped; positions() stay
  // token indices. An error when n alone does not fit.
  Status MakeRoom(size_t n);
  int ctx() const { return ctx_; }
  int bos() const;
  int eos() const;
  // The most bytes this session's KV held at once (KvCache::BytesHeld, plus
  // a reference pass's copy of the cache while it ran), taken after every
  // forward pass and compression; a fork starts at its copy's bytes.
  size_t peak_kv_bytes() const { return peak_kv_bytes_; }
  // Starts peak_kv_bytes() afresh from the bytes held now (a conversation's
  // peak per turn).
  void ResetPeak();
  // A conversation's session: with a policy that lags a turn
  // (kv::ReferencePass::turn_lag, Attention Matching) each prompt is held
  // whole through Compress() and compacted at the next one, so a turn is
  // answered from its own words. compressed_to() is where the held tokens
  // begin (tokens_ before it were compressed, or passed over by a turn-local
  // reference pass); a conversation saves it and restores it on load.
  void set_hold_newest_turn(bool on) { hold_newest_ = on; }
  size_t compressed_to() const { return passed_to_; }
  void set_compressed_to(size_t n);  // at most the tokens held
  // The library's inside: the cache, its compressor, the thread pool it runs
  // on (src/engine/engine_impl.h; opaque here).
  struct Impl;
  Impl& impl() { return *impl_; }
  const Impl& impl() const { return *impl_; }

 private:
  Session();
  Status CheckRoom(size_t n) const;
  Status CheckTokens(const int* t, size_t n) const;  // every id inside the vocabulary
  Status SetupQuality();  // loads the calibration of opts_.kv when quality > 0
  void AddNll(const std::vector<float>& rows, const int* tokens, int n);
  // Forward passes over n tokens in ubatches (the prefill's, one chunk's).
  Status ForwardPrompt(const int* tokens, size_t n);
  // The policy's ReferencePass (Attention Matching's repeat-prefill): on a
  // copy of the cache, "Repeat the previous context." and the context again
  // (tokens_ from pass_from_: a chunked prefill repeats only the chunk that
  // just ended, KVzip's chunked reconstruction); the rotated queries and the
  // taps go to the compressor's statistics. With `compressed` and a policy
  // that compresses in its pass (ReferencePass::compress_in_pass), each
  // layer of the cache is compressed as the pass reaches it (a chunk of a
  // prompt ending at prompt_end, or with -1 the whole prefill) and
  // *compressed says whether it was (no pass runs when nothing is evicted).
  Status RunReferencePass(int64_t prompt_end = -1, bool* compressed = nullptr);
  // RunReferencePass's pass for a policy that compresses in it: the
  // instruction and the repeated tokens, tokens_ covered up to `to`, the
  // pass's tiles in bf16 or not.
  Status RunCompressingPass(const std::vector<int>& instr, const std::vector<int>& again, size_t to, bool bf16,
                            int64_t prompt_end, bool* compressed);
  void NotePeak(size_t extra = 0);    // peak_kv_bytes_ = max(it, the cache's bytes + extra)
  const Engine* engine_ = nullptr;
  std::unique_ptr<Impl> impl_;
  int ctx_ = 0;
  int ubatch_ = 512;
  SessionOptions opts_;
  std::vector<float> logits_;
  double calib_alpha_ = 0, calib_beta_ = 0;  // with quality > 0
  double nll_sum_ = 0;
  int64_t nll_count_ = 0;
  double chosen_ratio_ = 1;
  std::string note_;  // context_note()
  size_t peak_kv_bytes_ = 0;
  double prefill_s_ = 0;     // seconds spent in Prefill so far (reported against the reference pass)
  std::vector<int> tokens_;  // every token appended so far (reference passes replay them)
  // The tokens_ a reference pass repeats: [pass_from_, pass_to_) (pass_to_ 0:
  // to the end); a chunked prefill's pass repeats the chunk that just ended.
  size_t pass_from_ = 0, pass_to_ = 0;
  // tokens_ covered by this session's passes and compressions so far: with a
  // turn-local policy (ReferencePass::turn_local, KVzip's carried scores) a
  // later prefill's pass starts here, not at the first token. 0 on a fork or
  // a loaded context (its policy carries no scores): the whole context again.
  size_t passed_to_ = 0;
  bool hold_newest_ = false;  // set_hold_newest_turn
  // Reference passes already run on this session's state, shared with its
  // forks: a fork that compresses before changing anything reuses the pass
  // another fork ran (an eval runs one pass per context, not per ratio).
  struct RefPassMemo;
  struct RefPassResult;
  mutable std::shared_ptr<RefPassMemo> ref_memo_;
  // This session's state: a new id after every change of its cache (a fork
  // starts with its parent's, so an unchanged fork shares its passes).
  uint64_t state_ = NewStateId();
  static uint64_t NewStateId();
  void ApplyReferencePass(RefPassResult& r, bool queries, bool reused, bool take);
  void ShareReferencePasses(Session* fork) const;  // the fork starts in this state, sharing its passes
};

// What a context file holds, without loading it into an engine (`kvtrim
// context inspect`): its JSON header and the entries of every KV head.
struct ContextFileInfo {
  std::string header;            // the file's JSON header, pretty-printed
  int64_t tokens = 0;
  std::vector<int> head_entries;  // flat layer * n_head_kv + head
  size_t row_bytes = 0;
  size_t file_bytes = 0;
};
Expected<ContextFileInfo> InspectContextFile(const std::string& path);
// What a context file must match to load on `engine` (model metadata hash,
// tokenizer hash, RoPE, head layout) and every KV option, as one string:
// the server's prompt-cache keys hash it with the token ids, so that a store
// shared by servers of different models or options never confuses them.
std::string ContextIdentity(const Engine& engine, const KvOptions& kv);

// Picks the next token from logits with SamplingOptions' chain (llama.cpp's
// default order): penalties, top-k, top-p, min-p, temperature, a seeded
// draw; greedy (after the penalties) at temp 0. Its cost is linear in the
// vocabulary and never sorts it (src/engine/sampler.cpp).
class Sampler {
 public:
  explicit Sampler(const SamplingOptions& o);
  // A token of the sequence (prompt or generated): the repetition penalty
  // looks back over the last repeat_last_n of them.
  void Accept(int id);
  int Sample(const std::vector<float>& logits);

 private:
  double Uniform();  // [0, 1)
  void WeighTopK(const float* l, int n, float top);
  void WeighAll(const float* l, int n, float top);
  double Weight(float logit, float top) const;
  SamplingOptions o_;
  uint64_t state_;
  std::vector<int> recent_;  // the last repeat_last_n accepted tokens, oldest first
  std::vector<float> work_;  // penalized logits

 public:
  // A token still in the chain (scratch of Sample, reused across calls).
  struct Candidate {
    double p;  // its probability at temperature 1 among the tokens still in
    float logit;
    int id;
  };

 private:
  std::vector<Candidate> cand_;
  std::vector<double> prob_;
};

// Gives the sampler the session's tokens so far (prompt, stored context):
// the repetition penalty looks back over them, as llama.cpp's does.
void AcceptHistory(const Session& s, Sampler& sampler);

struct GenerateStats {
  int prompt_tokens = 0;
  int generated = 0;     // tokens sampled (n unless EOS came first)
  int decode_steps = 0;  // single-token forward passes
  double prefill_s = 0;
  double decode_s = 0;
  double sample_s = 0;   // of decode_s, in the sampler (every token's Sample)
};

// What Generate does with the prompt before sampling: compress it (prefill-
// time compression; off for a question on a loaded context, which stays as
// it was compressed), then save the context (Session::SaveContext) when a
// path is given.
struct PromptStep {
  bool compress = true;
  std::string save_context;
  // Asked before each token is sampled: false ends the generation there
  // (an interactive chat's Ctrl-C). Empty: never.
  std::function<bool()> keep_going;
};

// Prefill `prompt`, then generate n tokens (llama.cpp's `-n, --n-predict`):
// n tokens are sampled and n - 1 of them fed back as decode steps, so the
// sequence fills prompt + n - 1 positions. Stops early at EOS or BOS.
// on_token gets each new id as it is produced. The prompt may be empty on
// a session that already holds tokens (a loaded context).
Expected<GenerateStats> Generate(Session& s, const std::vector<int>& prompt, int n, const SamplingOptions& so,
                                 const std::function<void(int)>& on_token, const PromptStep& step = {});

}  // namespace kvtrim
