// The reference pass (kv::ReferencePass: Attention Matching's repeat-prefill,
// KVzip's reconstruction), one routine for every policy that asks for one,
// and its memo: forks of one session that compress before changing anything
// share one pass of each kind (an eval's cells of one context at every
// ratio), each charged the pass's time and its copy's bytes as if it had run
// it alone.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <numeric>
#include <string>

#include "engine/engine_impl.h"
#include "io/tokenizer.h"
#include "kv/cache.h"
#include "kv/compressor.h"
#include "kv/policy.h"
#include "kv/stats.h"
#include "kvtrim/engine.h"
#include "model/config.h"
#include "model/transformer.h"

namespace kvtrim {

struct Session::RefPassResult {
  std::vector<std::vector<float>> q_repeat;  // per head (l * n_head_kv + h), when the pass collects queries
  std::vector<kv::TapSet> taps;               // per head, over the entries held before the pass
  double seconds = 0;                         // what the pass took
  size_t copy_bytes = 0;                      // the cache copy it held
  size_t tokens = 0;                          // tokens repeated
};

struct Session::RefPassMemo {
  std::mutex mu;
  uint64_t state = 0;  // the session state the results belong to (Session::state_)
  std::map<std::string, RefPassResult> results;  // by the pass's settings
};

uint64_t Session::NewStateId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

void Session::ShareReferencePasses(Session* fork) const {
  if (!ref_memo_) ref_memo_ = std::make_shared<RefPassMemo>();
  fork->ref_memo_ = ref_memo_;
  fork->state_ = state_;
}

namespace {

// What a pass's result depends on besides the session's state.
std::string PassKey(const kv::ReferencePass& rp, size_t from, size_t to, int ubatch, bool bf16) {
  std::string k = rp.instruction + '\x1f' + std::to_string(rp.past_context) + std::to_string(rp.queries) +
                  std::to_string(rp.output_weights) + '\x1f' + std::to_string(from) + ':' + std::to_string(to) +
                  ':' + std::to_string(ubatch) + ':' + std::to_string(rp.repeat_chunk) + (bf16 ? ":bf16" : "");
  for (const kv::TapUse& u : rp.taps) k += '\x1f' + u.name + '=' + std::to_string(u.param);
  return k;
}

// Teacher-forces `again` after the instruction already in `work`, in
// ubatches, feeding `rep`. With a repeat chunk shorter than `again`, each
// chunk of it reads the held entries, the instruction and its own repeat
// only (KVzip's chunked scoring): `work` is rewound to what it held before
// the repeat between chunks, so the entries held before the pass keep their
// indices. Returns the most bytes `work` held, or an error.
Expected<size_t> Repeat(const model::Transformer& tf, kernels::ThreadPool& pool, kv::KvCache& work,
                        const std::vector<int>& again, size_t repeat_chunk, int ubatch, kv::AttentionStats& rep) {
  const size_t step = repeat_chunk > 0 ? repeat_chunk : again.size();
  const int64_t len0 = work.logical_length();
  std::vector<int> size0;
  for (int l = 0; l < work.n_layer(); ++l)
    for (int h = 0; h < work.n_head_kv(); ++h) size0.push_back(work.head(l, h).size());
  work.ReserveMore(static_cast<int>(std::min(step, again.size())));  // one allocation, rewinds keep it
  size_t peak = work.BytesHeld();
  for (size_t s0 = 0; s0 < again.size(); s0 += step) {
    if (s0 > 0) {  // rewind: the next chunk repeats right after the instruction
      for (int l = 0, f = 0; l < work.n_layer(); ++l)
        for (int h = 0; h < work.n_head_kv(); ++h) work.head(l, h).Truncate(size0[f++]);
      work.AdvanceLogical(len0 - work.logical_length());
    }
    const size_t s1 = std::min(again.size(), s0 + step);
    for (size_t i = s0; i < s1; i += ubatch) {
      const int n = static_cast<int>(std::min<size_t>(ubatch, s1 - i));
      KVTRIM_RETURN_IF_ERROR(tf.Forward(pool, work, again.data() + i, n, false, nullptr, &rep));
    }
    peak = std::max(peak, work.BytesHeld());
  }
  return peak;
}

// The statistics of a pass that compresses each layer as it reaches it
// (ReferencePass::compress_in_pass), which before each layer's attention
// run `at_layer(l, *this)`.
class InPassStats final : public kv::AttentionStats {
 public:
  InPassStats(const model::ModelConfig& c, kv::StatsNeeds needs,
              std::function<Status(int, kv::AttentionStats&)> at_layer)
      : AttentionStats(c.n_layer, c.n_head_kv, c.group(), c.head_dim, needs), at_layer_(std::move(at_layer)) {}
  Status BeforeAttend(int l) override { return at_layer_(l, *this); }

 private:
  std::function<Status(int, kv::AttentionStats&)> at_layer_;
};

// The pass of ReferencePass::compress_in_pass: `tokens` (the instruction,
// its first `instr` tokens, then the repeat) go through the model as one
// batch, so every layer's queries are complete before that layer is
// compressed. The pass's own cache starts empty at each layer: before the
// layer's attention, its repeat queries (the instruction's rows left out)
// go to `into`, `compress(l)` compresses that layer of `cache`, and the
// pass takes the compressed layer, so its attention and every later layer
// read what the compressed cache holds (on-policy, as ReferencePass::on_policy's
// re-runs, in one pass). Returns the bytes the pass's cache held at the end.
Expected<size_t> CompressingPass(const model::Transformer& tf, const model::ModelConfig& c, kernels::ThreadPool& pool,
                                 const kv::KvCache& cache, const std::vector<int>& tokens, size_t instr, bool bf16,
                                 kv::AttentionStats& into, const std::function<Status(int)>& compress) {
  kv::KvCache work(cache.n_layer(), cache.n_head_kv(), cache.head_dim(), cache.type(), cache.rotated());
  work.set_rope_map(cache.rope_map());
  work.AdvanceLogical(static_cast<int>(cache.logical_length()));
  work.set_bf16_tiles(bf16);
  const int T = static_cast<int>(tokens.size());
  const size_t skip = instr * static_cast<size_t>(c.group()) * cache.head_dim();  // the instruction's query rows
  kv::StatsNeeds needs;
  needs.prefill_qk = true;
  InPassStats rep(c, needs, [&](int l, kv::AttentionStats& self) -> Status {
    for (int h = 0; h < cache.n_head_kv(); ++h) {
      std::vector<float>& q = self.head(l, h).q_rot;
      q.erase(q.begin(), q.begin() + static_cast<std::ptrdiff_t>(std::min(skip, q.size())));
      into.head(l, h).q_repeat = std::move(q);
    }
    KVTRIM_RETURN_IF_ERROR(compress(l));
    for (int h = 0; h < cache.n_head_kv(); ++h) {
      work.head(l, h) = cache.head(l, h);
      work.head(l, h).Reserve(work.head(l, h).size() + T);
    }
    return {};
  });
  rep.ReserveQueries(tokens.size());
  KVTRIM_RETURN_IF_ERROR(tf.Forward(pool, work, tokens.data(), T, false, nullptr, &rep));
  return work.BytesHeld();
}

}  // namespace

// Hands a result to the compressor's statistics: moved when nothing keeps
// it (`take`), else copied (the memo keeps its own for the other forks).
void Session::ApplyReferencePass(RefPassResult& r, bool queries, bool reused, bool take) {
  const auto& c = engine_->impl().config();
  for (int l = 0; l < c.n_layer; ++l)
    for (int h = 0; h < c.n_head_kv; ++h) {
      const size_t f = static_cast<size_t>(l) * c.n_head_kv + h;
      kv::HeadStats& into = impl_->compressor_->stats().head(l, h);
      if (queries) into.q_repeat = take ? std::move(r.q_repeat[f]) : r.q_repeat[f];
      std::vector<std::string> names;
      for (const auto& [name, stat] : r.taps[f]) names.push_back(name);
      for (const std::string& name : names) {
        into.reference.Take(name);
        into.reference.Add(name, take ? r.taps[f].Take(name) : r.taps[f].Find(name)->Clone());
      }
    }
  NotePeak(r.copy_bytes);  // the copy and the cache, both held
  impl_->compressor_->AddReferenceTiming(r.seconds, prefill_s_, reused, static_cast<int64_t>(r.tokens));
}

Status Session::RunReferencePass(int64_t prompt_end, bool* compressed) {
  const kv::ReferencePass rp = impl_->compressor_->policy().traits().reference_pass;
  if (!rp.repeat || tokens_.empty()) return {};
  bool compresses = false;  // skip the pass when no layer's budget bites
  for (int l = 0; l < engine_->impl().config().n_layer; ++l) compresses |= impl_->compressor_->Budget(l, position()) < position();
  if (!compresses) return {};
  const auto t0 = std::chrono::steady_clock::now();
  const auto& c = engine_->impl().config();
  std::vector<int> instr = engine_->impl().tokenizer().Encode(rp.instruction, false);
  const size_t to = pass_to_ > 0 ? std::min(pass_to_, tokens_.size()) : tokens_.size();
  const size_t from = std::max<size_t>(std::min(pass_from_, to), tokens_.front() == bos() ? 1 : 0);
  std::vector<int> again(tokens_.begin() + static_cast<std::ptrdiff_t>(std::min(from, to)),
                         tokens_.begin() + static_cast<std::ptrdiff_t>(to));
  // Within the model's trained context unless the policy asks for all of it.
  const int64_t room = c.ctx - rope_position() - static_cast<int64_t>(instr.size());
  if (!rp.past_context) again.resize(static_cast<size_t>(std::clamp<int64_t>(room, 0, again.size())));
  if (again.empty()) return {};
  KVTRIM_RETURN_IF_ERROR(kv::CheckTaps(rp.taps));
  auto tiles = kv::Bf16TilesOf(opts_.kv);  // checked by Session::Create
  if (!tiles.ok()) return tiles.error();
  const bool bf16 = tiles->pass;  // scores that rank entries
  if (compressed && rp.compress_in_pass) return RunCompressingPass(instr, again, to, bf16, prompt_end, compressed);
  // Shared with the session's other forks only for a whole prompt's pass on
  // an unchanged state (on-policy passes follow this fork's own compression).
  const bool memo = ref_memo_ && !rp.on_policy && pass_to_ == 0;
  const std::string key = PassKey(rp, from, to, ubatch_, bf16);
  if (memo) {
    std::lock_guard<std::mutex> lock(ref_memo_->mu);
    if (ref_memo_->state == state_)
      if (auto it = ref_memo_->results.find(key); it != ref_memo_->results.end()) {
        ApplyReferencePass(it->second, rp.queries, true, false);
        passed_to_ = to;
        return {};
      }
  }
  kv::KvCache copy(*impl_->cache_);
  copy.set_bf16_tiles(bf16);
  kv::StatsNeeds needs;
  needs.prefill_qk = rp.queries;
  needs.taps = rp.taps;
  kv::AttentionStats rep(c.n_layer, c.n_head_kv, c.group(), c.head_dim, needs);
  rep.ReserveQueries(instr.size() + again.size());
  const auto& tf = engine_->impl().transformer();
  KVTRIM_RETURN_IF_ERROR(tf.Forward(impl_->pool(*engine_), copy, instr.data(), static_cast<int>(instr.size()), false, nullptr));
  Expected<size_t> peak = Repeat(tf, impl_->pool(*engine_), copy, again, static_cast<size_t>(rp.repeat_chunk), ubatch_, rep);
  if (!peak.ok()) return peak.error();
  RefPassResult r;
  r.copy_bytes = *peak;
  r.tokens = again.size();
  r.q_repeat.resize(static_cast<size_t>(c.n_layer) * c.n_head_kv);
  r.taps.resize(r.q_repeat.size());
  for (int l = 0; l < c.n_layer; ++l)
    for (int h = 0; h < c.n_head_kv; ++h) {
      const size_t f = static_cast<size_t>(l) * c.n_head_kv + h;
      if (rp.queries) r.q_repeat[f] = std::move(rep.head(l, h).q_rot);
      std::vector<int> held(static_cast<size_t>(impl_->cache_->head(l, h).size()));
      std::iota(held.begin(), held.end(), 0);  // the entries held before the pass
      for (const kv::TapUse& use : rp.taps)
        if (std::unique_ptr<kv::EntryStat> s = rep.head(l, h).taps.Take(use.name)) {  // registered (checked above)
          s->Retain(held);
          r.taps[f].Add(use.name, std::move(s));
        }
    }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ApplyReferencePass(r, rp.queries, false, !memo);
  passed_to_ = to;  // scored up to here (a pass skipped as nothing is evicted scores nothing)
  if (memo) {
    std::lock_guard<std::mutex> lock(ref_memo_->mu);
    if (ref_memo_->state != state_) ref_memo_->results.clear(), ref_memo_->state = state_;
    ref_memo_->results[key] = std::move(r);
  }
  return {};
}

// The pass that compresses each layer as it reaches it (CompressingPass):
// the time the compression took in it is the compressor's, not the pass's.
Status Session::RunCompressingPass(const std::vector<int>& instr, const std::vector<int>& again, size_t to, bool bf16,
                                   int64_t prompt_end, bool* compressed) {
  const kv::ReferencePass& rp = impl_->compressor_->policy().traits().reference_pass;
  if (!rp.taps.empty() || rp.output_weights || rp.repeat_chunk > 0)
    return MakeError("a reference pass that compresses each layer as it reaches it takes queries only, the whole "
                     "range at once (no taps, no repeat chunks)");
  const auto t0 = std::chrono::steady_clock::now();
  const auto& c = engine_->impl().config();
  kv::Compressor& comp = *impl_->compressor_;
  kernels::ThreadPool& pool = impl_->pool(*engine_);
  std::vector<int> tokens = instr;
  tokens.insert(tokens.end(), again.begin(), again.end());
  double in_compress = 0;
  auto compress = [&](int l) -> Status {
    const double s0 = comp.compress_seconds();
    Status st = prompt_end >= 0 ? comp.CompressChunkLayer(*impl_->cache_, l, prompt_end, &pool)
                                : comp.CompressPrefillLayer(*impl_->cache_, l, &pool);
    in_compress += comp.compress_seconds() - s0;
    return st;
  };
  Expected<size_t> peak = CompressingPass(engine_->impl().transformer(), c, pool, *impl_->cache_, tokens, instr.size(),
                                          bf16, comp.stats(), compress);
  if (!peak.ok()) return peak.error();
  *compressed = true;
  RefPassResult r;
  r.copy_bytes = *peak;
  r.tokens = again.size();
  r.taps.resize(static_cast<size_t>(c.n_layer) * c.n_head_kv);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() - in_compress;
  ApplyReferencePass(r, false, false, true);
  passed_to_ = to;
  return {};
}

}  // namespace kvtrim
