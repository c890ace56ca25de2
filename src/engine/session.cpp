#include <algorithm>
#include <numeric>
#include <chrono>
#include <cmath>

#include "engine/engine_impl.h"
#include "kvtrim/engine.h"
#include "io/tokenizer.h"
#include "kv/cache.h"
#include "kernels/thread_pool.h"
#include "kv/calibration.h"
#include "kv/compressor.h"
#include "kvtrim/head_budgets.h"
#include "kv/profile.h"
#include "kvtrim/calib_fit.h"
#include "model/config.h"
#include "model/output_gram.h"
#include "model/transformer.h"

namespace kvtrim {

namespace {

// Policies built on a model profile (razor) get the engine's; nonuniform
// head budgets come from the profile's head_budgets (on with
// KvOptions::head_budgets = 1, by default for am given a profile that has them).
Status AttachProfile(const Engine& e, kv::Compressor& c, const KvOptions& kv) {
  const bool required = kv.head_budgets > 0;
  const bool by_default = c.policy().traits().profile_head_budgets;
  const bool head_budgets = required || (kv.head_budgets < 0 && by_default && !kv.profile.empty());
  if (required && kv.profile.empty())
    return MakeError("head budgets need a profile that has them: --profile FILE from `kvtrim profile --head-budgets`");
  if (!c.policy().traits().wants_profile && !head_budgets) return {};
  auto p = e.Profile(kv.profile);
  if (!p.ok()) return p.error();
  if (c.policy().traits().wants_profile) c.policy().SetProfile(p.value());
  if (!head_budgets) return {};
  if (!HasHeadBudgets(*p.value())) {
    if (!required) return {};
    return MakeError("profile '" + kv.profile + "' has no head budgets (make it with `kvtrim profile --head-budgets`)");
  }
  auto hb = HeadBudgetsOf(*p.value(), p.value()->n_layer * p.value()->n_head_kv);
  if (!hb.ok()) return MakeError("'" + kv.profile + "': " + hb.error().message);
  // At the ratio asked for, searched again on the stored curves when it is
  // not the profile's; a token budget or a quality target (ratio not known
  // yet) takes the profile's shares as they are.
  if (kv.budget_tokens > 0 || kv.quality > 0 || kv.ratio >= 1) return c.SetHeadUnits(std::move(hb.value().units));
  auto units = UnitsAtRatio(hb.value(), kv.ratio);
  if (!units.ok()) return Error{"'" + kv.profile + "': " + units.error().message, units.error().code};
  return c.SetHeadUnits(std::move(units.value()));
}

// What the compressor's policies read of the model: its RoPE, and the
// output projection's Gram blocks when the policy weighs values by it (KVzip+).
Status ConnectModel(const Engine& e, kv::Compressor& c) {
  const auto& cfg = e.impl().config();
  kv::RopeSpec r;
  r.rot_dims = cfg.rope_dims > 0 ? cfg.rope_dims : cfg.head_dim;
  r.base = cfg.rope_base;
  r.neox = cfg.rope_mode == kernels::RopeMode::kNeox;
  c.SetRope(r);
  if (!c.policy().traits().reference_pass.output_weights || c.has_output_gram()) return {};
  c.SetOutputGram(model::OutputGrams(cfg, e.impl().transformer().weights()));
  if (!c.has_output_gram()) return MakeError("the policy weighs values by the output projection, which is not [dim, n_head*head_dim] "
                     "in this model");
  return {};
}

}  // namespace

Expected<std::unique_ptr<Session>> Session::Create(const Engine& engine, const SessionOptions& opts) {
  const auto& c = engine.impl().config();
  if (opts.ctx < 0) return MakeError("context length must be >= 0");
  if (opts.ctx > c.ctx) {
    return MakeError("context length " + std::to_string(opts.ctx) + " exceeds the model's trained context of " +
                     std::to_string(c.ctx) + " tokens");
  }
  if (opts.ubatch <= 0) return MakeError("ubatch must be positive");
  auto comp = kv::Compressor::Create(opts.kv, c.n_layer, c.n_head_kv, c.group(), c.head_dim, opts.fork_targets);
  if (!comp.ok()) return comp.error();
  KVTRIM_RETURN_IF_ERROR(AttachProfile(engine, *comp.value(), opts.kv));
  KVTRIM_RETURN_IF_ERROR(kv::Compressor::CheckStreams(opts.kv, comp.value()->policy()));
  if (opts.kv.prefill_chunk > 0 && !opts.fork_targets.empty())
    return MakeError("--prefill-chunk: forks share one prefill, which a chunked prefill compresses as it goes; "
                     "prefill each policy on its own");
  std::unique_ptr<Session> s(new Session());
  s->engine_ = &engine;
  s->opts_ = opts;
  s->ctx_ = opts.ctx > 0 ? opts.ctx : c.ctx;
  s->ubatch_ = opts.ubatch;
  // Entries are stored in the asked type from the first token (quant_at
  // "write"), or in f32 until compression has chosen what to keep ("kept").
  auto type = kv::WriteType(opts.kv);
  if (!type.ok()) return type.error();
  auto bf16 = kv::Bf16TilesOf(opts.kv);
  if (!bf16.ok()) return bf16.error();
  auto rotated = kv::RotatesKv(opts.kv, type.value());
  if (!rotated.ok()) return rotated.error();
  s->impl_->cache_ =
      std::make_unique<kv::KvCache>(c.n_layer, c.n_head_kv, c.head_dim, type.value(), rotated.value());
  s->impl_->cache_->set_bf16_tiles(bf16->prefill);
  s->impl_->compressor_ = std::move(comp.value());
  KVTRIM_RETURN_IF_ERROR(ConnectModel(engine, *s->impl_->compressor_));
  s->chosen_ratio_ = opts.kv.ratio;
  KVTRIM_RETURN_IF_ERROR(s->SetupQuality());
  return s;
}

Session::Session() : impl_(std::make_unique<Impl>()) {}
Session::~Session() = default;

Status Session::SetupQuality() {
  const KvOptions& kv = opts_.kv;
  if (kv.quality == 0) return {};
  if (!(kv.quality > 0 && kv.quality <= 1))
    return MakeError("quality target " + std::to_string(kv.quality) + " is outside (0, 1]");
  if (kv.calibration.empty()) return MakeError("a quality target needs a calibration file (kvtrim calibrate)");
  auto cal = kv::LoadCalibration(kv.calibration);
  if (!cal.ok()) return cal.error();
  const kv::MethodCalibration* m = cal->Find(kv.policy);
  if (!m) return MakeError("policy '" + kv.policy + "' is not in the calibration file '" + kv.calibration + "'");
  calib_alpha_ = m->alpha;
  calib_beta_ = m->beta;
  return {};
}

double Session::context_nll() const { return nll_count_ > 0 ? nll_sum_ / static_cast<double>(nll_count_) : NAN; }

const KvOptions& Session::kv_options() const { return impl_->compressor_->options(); }

// rows [n, V]: row t predicts token t + 1; the first token is predicted by
// the logits already held (none for the first token of the sequence).
void Session::AddNll(const std::vector<float>& rows, const int* tokens, int n) {
  const size_t V = engine_->impl().config().vocab;
  auto nll = [V](const float* l, int target) {
    const float mx = *std::max_element(l, l + V);
    double z = 0;
    for (size_t i = 0; i < V; ++i) z += std::exp(static_cast<double>(l[i] - mx));
    return std::log(z) - static_cast<double>(l[target] - mx);
  };
  for (int t = 0; t < n; ++t) {
    const float* prev = t > 0 ? &rows[(t - 1) * V] : (logits_.size() == V && position() > n ? logits_.data() : nullptr);
    if (!prev || tokens[t] < 0 || static_cast<size_t>(tokens[t]) >= V) continue;
    nll_sum_ += nll(prev, tokens[t]);
    ++nll_count_;
  }
}


int Session::bos() const { return engine_->impl().tokenizer().bos(); }
int Session::eos() const { return engine_->impl().tokenizer().eos(); }

int64_t Session::position() const { return impl_->cache_->logical_length(); }

Expected<std::unique_ptr<Session>> Session::Fork(const KvOptions& kv) const {
  auto comp = impl_->compressor_->Fork(kv);
  if (!comp.ok()) return comp.error();
  KVTRIM_RETURN_IF_ERROR(AttachProfile(*engine_, *comp.value(), kv));
  std::unique_ptr<Session> s(new Session());
  s->engine_ = engine_;
  s->impl_->pool_ = impl_->pool_;
  s->opts_ = opts_;
  s->opts_.kv = kv;
  s->opts_.fork_targets.clear();
  s->ctx_ = ctx_;
  s->ubatch_ = ubatch_;
  s->impl_->cache_ = std::make_unique<kv::KvCache>(*impl_->cache_);
  s->impl_->compressor_ = std::move(comp.value());
  KVTRIM_RETURN_IF_ERROR(ConnectModel(*engine_, *s->impl_->compressor_));
  ShareReferencePasses(s.get());
  s->logits_ = logits_;
  s->prefill_s_ = prefill_s_;
  s->nll_sum_ = nll_sum_;
  s->nll_count_ = nll_count_;
  s->chosen_ratio_ = kv.ratio;
  KVTRIM_RETURN_IF_ERROR(s->SetupQuality());
  s->tokens_ = tokens_;
  s->note_ = note_;
  s->NotePeak();
  return s;
}

void Session::ResetPeak() { peak_kv_bytes_ = impl_->cache_->BytesHeld(); }

void Session::NotePeak(size_t extra) { peak_kv_bytes_ = std::max(peak_kv_bytes_, impl_->cache_->BytesHeld() + extra); }

Status Session::Compress() {
  if (opts_.kv.quality > 0) {  // context-calibrated: r* from NLL(c)
    const double nll = context_nll();
    if (!std::isfinite(nll)) return MakeError("a quality target needs a prefilled context of at least two tokens");
    chosen_ratio_ = RetentionForQuality(opts_.kv.quality, calib_alpha_ * nll + calib_beta_);
    impl_->compressor_->SetRatio(chosen_ratio_);
  }
  if (!impl_->compressor_->policy().traits().reference_pass.on_policy) {
    bool in_pass = false;  // compressed layer by layer in the pass (ReferencePass::compress_in_pass)
    KVTRIM_RETURN_IF_ERROR(RunReferencePass(-1, &in_pass));
    state_ = NewStateId();
    if (in_pass) impl_->compressor_->FinishPrefill(*impl_->cache_);
    else KVTRIM_RETURN_IF_ERROR(impl_->compressor_->CompressPrefill(*impl_->cache_, &impl_->pool(*engine_)));
    NotePeak();  // quantizing the kept entries may hold more than evicting freed
    return {};
  }
  // On-policy: layer l's reference queries come from a pass over the cache
  // whose layers below l are already compressed.
  for (int l = 0; l < engine_->impl().config().n_layer; ++l) {
    KVTRIM_RETURN_IF_ERROR(RunReferencePass());
    state_ = NewStateId();
    KVTRIM_RETURN_IF_ERROR(impl_->compressor_->CompressPrefillLayer(*impl_->cache_, l, &impl_->pool(*engine_)));
  }
  impl_->compressor_->FinishPrefill(*impl_->cache_);
  NotePeak();
  return {};
}

Status Session::CheckTokens(const int* t, size_t n) const {
  const int64_t V = engine_->impl().config().vocab;
  for (size_t i = 0; i < n; ++i)
    if (t[i] < 0 || t[i] >= V)
      return MakeError("token id " + std::to_string(t[i]) + " at position " + std::to_string(i) +
                       " is outside the vocabulary [0, " + std::to_string(V) + ")");
  return {};
}

Status Session::CheckRoom(size_t n) const {
  if (rope_position() + static_cast<int64_t>(n) > ctx_) {
    return MakeError("sequence of " + std::to_string(rope_position() + static_cast<int64_t>(n)) +
                     " tokens exceeds the context length of " + std::to_string(ctx_));
  }
  return {};
}

Status Session::ForwardPrompt(const int* tokens, size_t count) {
  const auto t0 = std::chrono::steady_clock::now();
  if (impl_->compressor_->tap()) impl_->compressor_->stats().ReserveQueries(count);
  impl_->cache_->ReserveMore(static_cast<int>(count));  // one allocation, not one per ubatch
  for (size_t i = 0; i < count; i += ubatch_) {
    int n = static_cast<int>(std::min<size_t>(ubatch_, count - i));
    if (opts_.kv.quality > 0) {  // every row's logits, for NLL(c)
      std::vector<float> rows;
      KVTRIM_RETURN_IF_ERROR(engine_->impl().transformer().Forward(impl_->pool(*engine_), *impl_->cache_, tokens + i, n, true, &rows,
                                                            impl_->compressor_->tap()));
      AddNll(rows, tokens + i, n);
      const size_t V = engine_->impl().config().vocab;
      logits_.assign(rows.end() - V, rows.end());
      NotePeak();
      continue;
    }
    KVTRIM_RETURN_IF_ERROR(engine_->impl().transformer().Forward(impl_->pool(*engine_), *impl_->cache_, tokens + i, n, false, &logits_,
                                                          impl_->compressor_->tap()));
    NotePeak();
  }
  prefill_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return {};
}

void Session::set_compressed_to(size_t n) { passed_to_ = std::min(n, tokens_.size()); }

Status Session::Prefill(const std::vector<int>& tokens) {
  KVTRIM_RETURN_IF_ERROR(CheckRoom(tokens.size()));
  KVTRIM_RETURN_IF_ERROR(CheckTokens(tokens.data(), tokens.size()));
  state_ = NewStateId();
  const int64_t end = position() + static_cast<int64_t>(tokens.size());
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  if (tokens.empty()) impl_->compressor_->BeginPrompt(end);
  // One chunk (prefill_chunk 0, or at least the prompt) is the one-shot prefill.
  const size_t chunk = opts_.kv.prefill_chunk > 0 ? static_cast<size_t>(opts_.kv.prefill_chunk) : tokens.size();
  const size_t first = tokens_.size() - tokens.size();  // this prompt's first token in tokens_
  pass_from_ = pass_to_ = 0;  // one chunk: a reference pass repeats every token, as ever
  // A turn-local pass after an earlier compression: only what came since
  // (the answer decoded and this prompt), the entries kept keeping their scores.
  // In a conversation a lagging policy holds this prompt's last chunk whole
  // (set_hold_newest_turn): its pass and compression stop where that chunk begins.
  const kv::ReferencePass& rp = impl_->compressor_->policy().traits().reference_pass;
  const bool lag = hold_newest_ && rp.turn_lag;
  const bool turn_local = rp.turn_local && (passed_to_ > 0 || lag);
  const size_t from0 = turn_local ? std::min(passed_to_, first) : first;  // the first chunk's pass starts here
  if (turn_local) pass_from_ = from0, pass_to_ = tokens_.size();
  // The reference queries are this prompt's and its pass's: the last answer's
  // decode queries go (a conversation loaded from its store has none: it
  // compacts as the one kept in memory would).
  if (lag) impl_->compressor_->stats().DropPrefillQK();
  for (size_t c0 = 0; c0 < tokens.size(); c0 += chunk) {
    const size_t n = std::min(chunk, tokens.size() - c0);
    const bool last = c0 + n == tokens.size();
    if (chunk < tokens.size()) pass_from_ = c0 == 0 ? from0 : first + c0, pass_to_ = first + c0 + n;  // chunked: its chunk only
    // The chunk's first position (PolicyContext::chunk_from): a turn-local
    // policy's first chunk starts where the last compression stopped (Attention
    // Matching compacts only what came since, its earlier entries kept).
    const int64_t chunk_from = c0 == 0 && turn_local ? static_cast<int64_t>(from0)
                               : chunk < tokens.size() ? position()
                                                       : -1;
    const int64_t hold_from = lag && last ? static_cast<int64_t>(first + c0) : -1;
    if (lag && last) {  // the pass repeats what comes before the held chunk (nothing: an empty range, not 0 = all)
      pass_to_ = first + c0;
      if (pass_to_ <= pass_from_) pass_from_ = pass_to_ = tokens_.size();
    }
    impl_->compressor_->BeginChunk(position() + static_cast<int64_t>(n), c0 == 0, chunk_from, hold_from);
    KVTRIM_RETURN_IF_ERROR(ForwardPrompt(tokens.data() + c0, n));
    if (last) break;  // the last chunk: Compress() takes it
    bool in_pass = false;  // compressed layer by layer in the pass (ReferencePass::compress_in_pass)
    if (impl_->compressor_->policy().traits().prefill_time) KVTRIM_RETURN_IF_ERROR(RunReferencePass(end, &in_pass));
    if (!in_pass) KVTRIM_RETURN_IF_ERROR(impl_->compressor_->CompressChunk(*impl_->cache_, end, &impl_->pool(*engine_)));
    NotePeak();
    if (opts_.on_chunk) opts_.on_chunk(static_cast<int64_t>(c0 + n), static_cast<int64_t>(tokens.size()));
  }
  return {};
}

Status Session::Decode(int token) {
  KVTRIM_RETURN_IF_ERROR(CheckRoom(1));
  KVTRIM_RETURN_IF_ERROR(CheckTokens(&token, 1));
  state_ = NewStateId();
  tokens_.push_back(token);
  KVTRIM_RETURN_IF_ERROR(engine_->impl().transformer().Forward(impl_->pool(*engine_), *impl_->cache_, &token, 1, false, &logits_,
                                                        impl_->compressor_->tap()));
  NotePeak();  // budget + 1 entries before decode-time compression
  return impl_->compressor_->AfterDecodeStep(*impl_->cache_, &impl_->pool(*engine_));
}

Expected<std::vector<float>> Session::ForwardAll(const std::vector<int>& tokens) {
  KVTRIM_RETURN_IF_ERROR(CheckRoom(tokens.size()));
  KVTRIM_RETURN_IF_ERROR(CheckTokens(tokens.data(), tokens.size()));
  state_ = NewStateId();
  const size_t V = engine_->impl().config().vocab;
  std::vector<float> all;
  all.reserve(tokens.size() * V);
  std::vector<float> part;
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  impl_->cache_->ReserveMore(static_cast<int>(tokens.size()));  // one allocation, not one per ubatch
  for (size_t i = 0; i < tokens.size(); i += ubatch_) {
    int n = static_cast<int>(std::min<size_t>(ubatch_, tokens.size() - i));
    KVTRIM_RETURN_IF_ERROR(engine_->impl().transformer().Forward(impl_->pool(*engine_), *impl_->cache_, tokens.data() + i, n, true, &part,
                                                          impl_->compressor_->tap()));
    all.insert(all.end(), part.begin(), part.end());
    NotePeak();
  }
  if (!tokens.empty()) logits_.assign(all.end() - V, all.end());
  return all;
}

}  // namespace kvtrim
