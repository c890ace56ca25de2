// The policy interface: a policy reads entry metadata and attention
// statistics of one (layer, KV head) and returns a Plan; it never touches
// the cache. Policies are found by name in the registry (registry.cpp), one
// source file each under policies/.
#pragma once
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "kv/budget.h"
#include "kv/cache.h"
#include "kv/plan.h"
#include "kv/stats.h"
#include "kv/taps.h"
#include "kvtrim/policies.h"
#include "kvtrim/status.h"

namespace kvtrim {
struct ModelProfile;  // kvtrim/profile.h
namespace kernels {
class ThreadPool;  // kernels/thread_pool.h
}  // namespace kernels
}  // namespace kvtrim

namespace kvtrim::kv {

// A policy's own flags: name (also the CLI flag --name), default, help,
// range, choices, kind (kvtrim/policies.h: one struct, listed as it is).
using ParamSpec = kvtrim::PolicyParam;
// A parameter that takes any real in its range / odd whole numbers only.
inline ParamSpec Real(ParamSpec s) {
  s.kind = ParamSpec::Kind::kReal;
  return s;
}
inline ParamSpec Odd(ParamSpec s) {
  s.kind = ParamSpec::Kind::kOdd;
  return s;
}
using Params = std::map<std::string, double>;

enum class Phase { kPrefill, kDecode };

// The model's rotary embedding, for policies that reason about queries at
// future positions (Expected Attention): pairs (2i, 2i+1), or (i, i + rot/2)
// with neox, rotated by pos * base^(-2i / rot_dims); dimensions past
// rot_dims are not rotated.
struct RopeSpec {
  int rot_dims = 0;
  double base = 10000.0;
  bool neox = false;
};

struct PolicyContext {
  Phase phase = Phase::kPrefill;
  int layer = 0, head = 0, n_layer = 1, n_head_kv = 1;
  const HeadStore* store = nullptr;
  const HeadStats* stats = nullptr;        // may be null (no statistics asked for)
  const AttentionStats* all_stats = nullptr;
  int budget = 0;                          // entries this head may keep
  int64_t logical_len = 0;
  int64_t rope_len = 0;                    // the next token's RoPE position (logical_len until a re-base)
  const RopeSpec* rope = nullptr;          // the model's RoPE (Compressor::SetRope), may be null
  // For a policy whose reference pass asks (ReferencePass::output_weights):
  // the group's G blocks M_g = W_o,g^T W_o,g [G][hd][hd] of this head's
  // query heads (model/output_gram.h: ||W_o,g v|| = sqrt(v^T M_g v)); null otherwise.
  const float* out_gram = nullptr;
  // A prompt prefilled in more than one chunk (KvOptions::prefill_chunk):
  // the first logical position of the chunk being compressed, and the length
  // the budget is for (the prompt's end); -1 and 0 otherwise (one-shot, a
  // single chunk, decode). A policy compacting each chunk to its share of
  // the budget (Attention Matching) reads them.
  int64_t chunk_from = -1;
  int64_t budget_len = 0;
  // A conversation's newest turn, held whole until the next compression
  // (ReferencePass::turn_lag): entries at logical positions >= hold_from are
  // kept as they are and the budget is for the positions before it; -1: none.
  int64_t hold_from = -1;
  // The reference computations' products (Attention Matching's scores) may
  // run in bf16, as the reference pass's tiles (KvOptions::bf16_attention
  // "pass" or "all"; the policy still checks that the CPU has them).
  bool bf16_products = false;
  // A pool the policy may spread this one head's work over: set only when
  // the compressor runs the head alone (the heads left over when a layer's
  // heads do not divide among the threads); null otherwise.
  kernels::ThreadPool* pool = nullptr;
};

// What prefill-time compression is asked to reach, for policies that plan
// the whole cache at once (razor solves its compression factor from it).
struct CompressionTarget {
  budget::Target target;        // the ratio or token count, and whether asked for (budget.h)
  int64_t n = 0;                // logical length being compressed
  int n_layer = 1, n_head_kv = 1;
};

// A second forward pass the engine runs before prefill-time compression to
// collect more reference queries (Attention Matching's repeat-prefill): it
// appends `instruction` and teacher-forces the context again on a copy of the
// cache; the rotated queries land in HeadStats::q_repeat, and the taps it
// names (KVzip: max-prob, the largest probability each entry receives from
// those queries) in HeadStats::reference, over the entries held before the pass.
struct ReferencePass {
  bool repeat = false;
  bool past_context = false;  // repeat the whole context even past the model's trained context
  bool on_policy = false;     // re-run before each layer, lower layers already compressed
  // On-policy in one pass: the whole repeat goes through the model as one
  // batch, and each layer is compressed when the pass reaches it (after its
  // queries, before its attention), so the pass's later layers read the
  // compressed ones, as on_policy's re-runs do, and its attention reads the
  // compressed layer, not the whole chunk. Streams (a chunked prefill
  // compresses each chunk so). Queries only: no taps.
  bool compress_in_pass = false;
  std::string instruction = "\nRepeat the previous context.\n";  // METHODS.md section 4 (am)
  bool queries = true;        // collect the rotated queries (q_repeat)
  std::vector<TapUse> taps;  // registry taps fed by the pass (HeadStats::reference)
  // The engine hands Compress the output projection (PolicyContext::out_gram):
  // KVzip+ weighs each entry by what its value adds to the residual stream.
  bool output_weights = false;
  // Tokens repeated per copy (0: the whole range at once): each chunk of the
  // repeat runs on its own copy of the cache and the instruction, so its
  // queries read the held entries, not the earlier chunks' repeats (KVzip's
  // chunked scoring; fewer keys a query, the same scored entries).
  int repeat_chunk = 0;
  // The pass may repeat only the tokens added since the last compression
  // (a conversation's turn): the policy keeps every kept entry's score from
  // the passes before (KVzip's carried scores), so what an earlier pass
  // repeated need not be repeated again.
  bool turn_local = false;
  // With turn_local, in a conversation (Session::set_hold_newest_turn): a
  // turn's own tokens are held whole while it is answered, and repeated and
  // compressed with the next turn (PolicyContext::hold_from). For a policy
  // whose compressed entries serve the reference queries, not the next
  // token's local context (Attention Matching: the turn being answered,
  // compacted, loses the words the answer continues from).
  bool turn_lag = false;
};

// Per-entry scores of one head (--head-budget adaptive, KVzip's shared budget).
using EntryScores = budget::EntryScores;

// A rate between two of a policy's counters, printed beside them
// ("fallback rate" = fallbacks / merges).
struct CounterRate {
  std::string label, numerator, denominator;
};

// What a policy is, as data: the facts the engine, the compressor and the
// listings read, never by constructing it (PolicyInfo::traits computes them
// from the parameters; a built policy holds its own, Policy::traits).
struct PolicyTraits {
  // When it compresses: after the prompt's prefill, at every decode step over budget.
  bool prefill_time = true;
  bool decode_time = true;
  // What it reads: the statistics collected for it, a second pass before
  // compressing (Attention Matching, KVzip), a model profile (razor: SetProfile).
  StatsNeeds needs = {};
  ReferencePass reference_pass = {};
  bool wants_profile = false;
  // How it keeps: entries it never evicts (sinks, protected recent tokens);
  // how the budget is spread over heads (kv/budget.h: uniform unless it names
  // another allocator: pyramid, KVzip's shared top-k over its Score, razor's
  // castes once Prepare has solved its window); whether Score gives per-entry
  // scores its Compress ranks by (--head-budget adaptive, the shared allocator).
  int protected_entries = 0;
  budget::Spec budget = {};
  bool scores_entries = false;
  // A prompt prefilled in chunks (KvOptions::prefill_chunk): whether it
  // compresses every head after every chunk, within budget or not (a policy
  // that compacts each chunk to its share); why it cannot take chunks (empty:
  // it can; unset: from the rest, see StreamBlocker).
  bool compresses_each_chunk = false;
  std::optional<std::string> stream_blocker = std::nullopt;
  // For callers outside the library: left out of the default eval sweep
  // (name it to run it); takes the profile's head budgets by default
  // (KvOptions::head_budgets < 0); rates over its counters worth printing.
  bool costly = false;
  bool profile_head_budgets = false;
  std::vector<CounterRate> rates = {};
};

// Why a policy with these traits cannot compress while a prompt is
// prefilled in chunks (empty when it can): what it says, or by default a
// reference pass over the whole context, or one budget shared by every head.
std::string StreamBlocker(const PolicyTraits& t);
// Whether --head-budget adaptive applies: it scores entries and leaves the
// allocation to the user (not KVzip's shared top-k, not razor's castes).
bool TakesAdaptiveBudgets(const PolicyTraits& t);

// A policy's behaviour: it reads entry metadata and statistics of one head
// and returns a plan. Its facts are its traits.
class Policy {
 public:
  virtual ~Policy() = default;
  const PolicyTraits& traits() const { return traits_; }
  // Called once before prefill-time compression, before any head changes; a
  // target the policy cannot meet returns MakeUnreachable.
  virtual Status Prepare(const CompressionTarget& /*t*/) { return {}; }
  // A policy built on a model profile (traits().wants_profile) gets it before compressing.
  virtual void SetProfile(std::shared_ptr<const ModelProfile> /*p*/) {}
  // For a policy that scores entries (traits().scores_entries): the scores
  // of one head (ctx.budget unused) that its Compress ranks by.
  virtual EntryScores Score(const PolicyContext& /*ctx*/) { return {}; }
  // A plan bringing the head to at most ctx.budget entries.
  virtual Plan Compress(const PolicyContext& ctx) = 0;
  // Chunked prefill: called on every head after each chunk but the last,
  // before the heads over budget are compressed and the chunk's pre-RoPE
  // keys and queries are dropped: a policy scoring from those folds what it
  // needs into state it carries (Compactor's scores).
  virtual void EndChunk(const PolicyContext& /*ctx*/) {}
  // Named counters the policy keeps (e.g. merges, fallbacks), for reports;
  // Compress may run on several heads at once, so counters are atomic.
  virtual std::vector<std::pair<std::string, int64_t>> Counters() const { return {}; }

 protected:
  // Set from the registration by MakePolicy; a policy whose facts change
  // once prepared (razor's castes) or one built by hand (tests) writes them.
  PolicyTraits& mutable_traits() { return traits_; }

 private:
  friend Expected<std::unique_ptr<Policy>> MakePolicy(const std::string& name, const Params& given);
  PolicyTraits traits_;
};

// A registered policy: its name, summary and parameters, how to build it,
// and its traits from its parameters (complete: defaults filled); the
// statistics it brings of its own are registered with it (taps.h).
struct PolicyInfo {
  std::string name;
  std::string summary;
  std::vector<ParamSpec> params;
  std::function<std::unique_ptr<Policy>(const Params&)> make;
  std::function<PolicyTraits(const Params&)> traits = nullptr;  // null: PolicyTraits' defaults
  std::vector<TapInfo> taps = {};
};
// Traits that do not depend on the parameters.
inline std::function<PolicyTraits(const Params&)> Fixed(PolicyTraits t) {
  return [t](const Params&) { return t; };
}

// Every registered policy: the built-in ones (registry.cpp) in a stable
// order, then those registered since. References stay valid.
const std::deque<PolicyInfo>& Registry();
// Registers a policy beside the built-in ones (tests, embedders), and the
// taps it brings; a name taken already, an empty name or no factory is an
// error. Register before sessions are made.
Status RegisterPolicy(PolicyInfo info);
const PolicyInfo* FindPolicy(const std::string& name);
// OK for a registered policy; otherwise an error naming the known ones.
Status CheckPolicyName(const std::string& name);
// A value of the parameter: in range, whole where the kind says so, odd where it must be.
Status CheckParam(const ParamSpec& s, double v);
// The policy's counter rates (PolicyTraits::rates) in percent, for counters
// summed by the caller; a rate whose denominator is 0 or absent is left out.
std::vector<std::pair<std::string, double>> CounterRates(const std::string& policy,
                                                         const std::vector<std::pair<std::string, int64_t>>& counters);
// The policy's parameters: `given` (only its own, each checked) over the defaults.
Expected<Params> CompleteParams(const PolicyInfo& info, const Params& given);
// The traits of a policy with these parameters, without building it.
Expected<PolicyTraits> TraitsFor(const std::string& name, const Params& given);
PolicyTraits TraitsOf(const PolicyInfo& info, const Params& complete);
// Builds a policy; `given` may hold only the policy's own parameters.
Expected<std::unique_ptr<Policy>> MakePolicy(const std::string& name, const Params& given);

// --- helpers shared by the eviction policies (select.cpp) ---

// Keeps every entry marked protected plus the highest-scoring others until
// `budget` entries are kept; ties keep the more recent entry. Returns the
// kept indices in increasing order.
std::vector<int> KeepTop(const std::vector<double>& score, const std::vector<bool>& prot, int budget);
// Protection mask: entries with position < sinks, and the last `recent`
// entries (at least the newest one).
std::vector<bool> ProtectSinksAndRecent(const HeadStore& s, int sinks, int recent);
// --value-norm choices: none (0), l2 (1), l1 (2); per-entry norms of the
// values (all 1 for none) to scale attention scores by (VATP, Compactor).
const std::vector<std::string>& ValueNormNames();
std::vector<double> ValueNorms(const HeadStore& s, int mode);

}  // namespace kvtrim::kv
