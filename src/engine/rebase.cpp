// Session::MakeRoom: a session's RoPE positions re-based when the tokens to
// come would pass the context length (src/kv/rope_map.h). A conversation in
// bounded memory holds few entries but its positions grow with every token
// it has seen; this keeps them within the context.
#include <algorithm>
#include <vector>

#include "engine/engine_impl.h"
#include "kv/cache.h"
#include "kvtrim/engine.h"
#include "model/transformer.h"

namespace kvtrim {

int64_t Session::rope_position() const { return impl_->cache_->rope_length(); }

Status Session::MakeRoom(size_t n) {
  const int64_t need = static_cast<int64_t>(n);
  if (rope_position() + need <= ctx_) return {};
  // Half the context free (llama.cpp's context shift frees half too), or
  // as much as n needs; the newer half of what stays keeps its distances.
  const int64_t target = std::min<int64_t>(ctx_ / 2, ctx_ - need);
  const int64_t recent = target / 2, old_span = target - recent;
  if (recent < 1 || old_span < 1)
    return MakeError(std::to_string(n) + " more tokens do not fit the context length " + std::to_string(ctx_) +
                     " beside what the session holds, even re-based");
  kv::KvCache& cache = *impl_->cache_;
  auto next = cache.rope_map().Squashed(position(), recent, old_span);
  if (!next.ok()) return next.error();
  const kv::RopeMap& now = cache.rope_map();
  const model::Rope& rope = engine_->impl().transformer().rope();
  const int d = cache.head_dim();
  const int heads = cache.n_layer() * cache.n_head_kv();
  // Every position held by some head, each turned once: its (cos, sin) row,
  // shared by the heads that hold it (up to every head of every layer).
  std::vector<int32_t> held;
  for (int f = 0; f < heads; ++f) {
    const std::vector<int32_t>& p = cache.head(f / cache.n_head_kv(), f % cache.n_head_kv()).positions();
    held.insert(held.end(), p.begin(), p.end());
  }
  std::sort(held.begin(), held.end());
  held.erase(std::unique(held.begin(), held.end()), held.end());
  const size_t stride = static_cast<size_t>(rope.table_stride());
  std::vector<float> turns(held.size() * stride);
  std::vector<char> moves(held.size());  // an entry that stays is not rewritten (nor re-quantized)
  for (size_t u = 0; u < held.size(); ++u) {
    const double delta = next->At(held[u]) - now.At(held[u]);
    moves[u] = delta != 0;
    rope.TurnTable(delta, &turns[u * stride]);
  }
  impl_->pool(*engine_).ParallelFor(heads, [&](int64_t f0, int64_t f1) {
    std::vector<float> row(static_cast<size_t>(d));
    for (int64_t f = f0; f < f1; ++f) {
      kv::HeadStore& hs = cache.head(static_cast<int>(f / cache.n_head_kv()), static_cast<int>(f % cache.n_head_kv()));
      for (int i = 0; i < hs.size(); ++i) {
        const size_t u = static_cast<size_t>(std::lower_bound(held.begin(), held.end(), hs.pos(i)) - held.begin());
        if (!moves[u]) continue;
        hs.ReadKey(i, row.data());
        rope.ApplyTable(row.data(), 1, d, &turns[u * stride]);
        hs.WriteKey(i, row.data());
      }
    }
  });
  cache.set_rope_map(std::move(next.value()));
  state_ = NewStateId();  // a reference pass of before would read other keys
  return {};
}

}  // namespace kvtrim
