// The RazorAttention probe (METHODS.md section 2): run the model on BOS and
// four copies of a seeded random block, score echo and induction per query
// head from the attention rows (kv::ProbeScorer), pick the retrieval heads.
#include <chrono>

#include "engine/engine_impl.h"
#include "io/splitmix.h"
#include "io/tokenizer.h"
#include "kv/cache.h"
#include "kv/profile.h"
#include "kvtrim/engine.h"
#include "model/config.h"
#include "model/transformer.h"

namespace kvtrim {

namespace {

// BOS, then `repeats` copies of K ids drawn uniformly from the ordinary
// (normal, non-control) vocabulary.
std::vector<int> ProbeTokens(const io::Tokenizer& tok, int K, int repeats, uint64_t seed) {
  std::vector<int> ordinary;
  for (int id = 0; id < tok.vocab_size(); ++id)
    if (tok.type(id) == io::TokenType::kNormal && id != tok.bos() && id != tok.eos()) ordinary.push_back(id);
  std::vector<int> block(K);
  uint64_t s = seed;
  for (int& id : block) id = ordinary[io::SplitMix64(s) % ordinary.size()];
  std::vector<int> seq{tok.start()};
  for (int r = 0; r < repeats; ++r) seq.insert(seq.end(), block.begin(), block.end());
  return seq;
}

}  // namespace

Expected<ModelProfile> ProfileModel(const Engine& engine, const ProfileOptions& o) {
  const model::ModelConfig& c = engine.impl().config();
  const int repeats = 4;
  const int K = o.probe_len > 0 ? o.probe_len : std::min(2500, c.ctx / 4 - 1);
  if (K < 1 || 1 + static_cast<int64_t>(repeats) * K > c.ctx)
    return MakeError("probe length " + std::to_string(K) + " does not fit: BOS + 4 x K must be at most the context of " +
                     std::to_string(c.ctx));
  if (!(o.echo_frac > 0 && o.echo_frac <= 1) || !(o.induction_frac > 0 && o.induction_frac <= 1))
    return MakeError("retrieval fractions must be in (0, 1]");
  std::vector<int> seq = ProbeTokens(engine.impl().tokenizer(), K, repeats, o.seed);
  if (seq.size() < 2) return MakeError("the vocabulary has no ordinary tokens to probe with");
  auto t0 = std::chrono::steady_clock::now();
  kv::KvCache cache(c.n_layer, c.n_head_kv, c.head_dim);
  kv::ProbeScorer scorer(c.n_layer, c.n_head_kv, c.group(), K);
  std::vector<float> logits;
  const int ubatch = 512;
  cache.ReserveMore(static_cast<int>(seq.size()));  // one allocation, not one per ubatch
  for (size_t i = 0; i < seq.size(); i += ubatch) {
    const int n = static_cast<int>(std::min<size_t>(ubatch, seq.size() - i));
    KVTRIM_RETURN_IF_ERROR(engine.impl().transformer().Forward(engine.impl().pool(), cache, seq.data() + i, n, false, &logits, &scorer));
  }
  ModelProfile p;
  p.model = engine.model_id();
  p.n_layer = c.n_layer;
  p.n_head = c.n_head;
  p.n_head_kv = c.n_head_kv;
  p.ctx = c.ctx;
  p.probe_len = K;
  p.repeats = repeats;
  p.seed = o.seed;
  p.echo = scorer.echo();
  p.induction = scorer.induction();
  p.echo_frac = o.echo_frac;
  p.induction_frac = o.induction_frac;
  p.heads = SelectRetrievalHeads(p.echo, p.induction, p.n_layer, p.n_head, p.n_head_kv, p.echo_frac, p.induction_frac);
  p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return p;
}

Expected<std::shared_ptr<const ModelProfile>> Engine::Profile(const std::string& path) const {
  std::lock_guard<std::mutex> lock(impl_->profile_mu);
  if (auto it = impl_->profiles.find(path); it != impl_->profiles.end()) return it->second;
  Expected<ModelProfile> p = path.empty() ? ProfileModel(*this, ProfileOptions{}) : ReadProfile(path);
  if (!p.ok()) return p.error();
  const ModelId& id = impl_->id;
  if (!path.empty()) {
    Status st = CheckProfileFor(p.value(), id, impl_->config_->n_layer, impl_->config_->n_head, impl_->config_->n_head_kv);
    if (!st.ok()) return MakeError("'" + path + "': " + st.message());
  }
  auto sp = std::make_shared<const ModelProfile>(std::move(p.value()));
  impl_->profiles[path] = sp;
  return std::shared_ptr<const ModelProfile>(sp);
}

}  // namespace kvtrim
