#include "model/transformer.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "kernels/attention_decode.h"
#include "kernels/hadamard.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/ordered_blocks.h"
#include "kernels/quant.h"
#include "kernels/scratch.h"

namespace kvtrim::model {
namespace {

void AddBias(float* x, const std::vector<float>& b, int T) {
  if (b.empty()) return;
  const int n = static_cast<int>(b.size());
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < n; ++i) x[t * n + i] += b[i];
}

thread_local ForwardProfile* t_profile = nullptr;

// ||h_t|| of each query's attention input, in double (KVzip+'s row normalisation).
void ReportHiddenNorms(ForwardObserver& obs, int layer, const float* xb, int T, int D) {
  std::vector<float> norms(T);
  for (int t = 0; t < T; ++t) {
    const float* h = xb + static_cast<size_t>(t) * D;
    double acc = 0;
    for (int i = 0; i < D; ++i) acc += static_cast<double>(h[i]) * h[i];
    norms[t] = static_cast<float>(std::sqrt(acc));
  }
  obs.OnHiddenNorms(layer, norms.data(), T);
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Adds the time from construction to destruction to *acc (nothing if acc is null).
class Span {
 public:
  explicit Span(std::atomic<int64_t>* acc) : acc_(acc), t0_(acc ? NowNs() : 0) {}
  ~Span() {
    if (acc_) acc_->fetch_add(NowNs() - t0_, std::memory_order_relaxed);
  }

 private:
  std::atomic<int64_t>* acc_;
  int64_t t0_;
};

// One decode step of layer l over entries stored quantized, with no tap:
// the split decode of kernels/attention_decode.h over the layer's heads.
void DecodeSplit(kernels::ThreadPool& pool, const kv::KvCache& cache, int l, const float* q, int G, float scale,
                 float* att) {
  thread_local std::vector<kernels::KvView> views;
  views.resize(cache.n_head_kv());
  for (int h = 0; h < cache.n_head_kv(); ++h) views[h] = cache.head(l, h).View();
  kernels::AttendDecode(pool, views, q, G, scale, att);
}

}  // namespace

ScopedForwardProfile::ScopedForwardProfile(ForwardProfile* p) : prev_(t_profile) { t_profile = p; }
ScopedForwardProfile::~ScopedForwardProfile() { t_profile = prev_; }

// Appends the batch's keys and values (after RoPE) to every head of layer
// l, then computes attention for the batch's queries: q [T, H*hd] -> att
// [T, H*hd].
void Transformer::AppendAndAttend(kernels::ThreadPool& pool, kv::KvCache& cache, int l, const float* q,
                                  const float* k, const float* v, int T, int pos0, float* att,
                                  ForwardObserver* obs, ForwardProfile* prof) const {
  const int hd = c_.head_dim, Hkv = c_.n_head_kv;
  const int q_dim = c_.n_head * hd, kv_dim = Hkv * hd;
  std::vector<int> n_before(Hkv);
  for (int h = 0; h < Hkv; ++h) {
    kv::HeadStore& hs = cache.head(l, h);
    n_before[h] = hs.size();
    if (T > 1) hs.Reserve(hs.size() + T);  // exact for a batch; decode grows by a quantum
    for (int t = 0; t < T; ++t) hs.Append(&k[t * kv_dim + h * hd], &v[t * kv_dim + h * hd], pos0 + t, 0.f);
  }
  if (!cache.rotated()) return Attend(pool, cache, l, q, k, v, T, pos0, n_before, att, obs, prof);
  // Rows stored rotated: the batch's queries, keys and values rotated alike
  // (the keys and values for the batch's own rows, attended in f32), the
  // output rotated back (kernels/hadamard.h).
  // Decode-sized batches reuse this thread's buffers; a prefill's are not kept.
  thread_local kernels::ScratchVector<float> qr_kept, kr_kept, vr_kept;
  kernels::ScratchVector<float> qr_fresh, kr_fresh, vr_fresh;
  const bool small = T <= 32;
  kernels::ScratchVector<float>& qr = small ? qr_kept : qr_fresh;
  kernels::ScratchVector<float>& kr = small ? kr_kept : kr_fresh;
  kernels::ScratchVector<float>& vr = small ? vr_kept : vr_fresh;
  qr.assign(q, q + static_cast<size_t>(T) * q_dim);
  kr.assign(k, k + static_cast<size_t>(T) * kv_dim);
  vr.assign(v, v + static_cast<size_t>(T) * kv_dim);
  kernels::RotateRows(qr.data(), T * c_.n_head, hd);
  kernels::RotateRows(kr.data(), T * Hkv, hd);
  kernels::RotateRows(vr.data(), T * Hkv, hd);
  Attend(pool, cache, l, qr.data(), kr.data(), vr.data(), T, pos0, n_before, att, obs, prof);
  kernels::UnrotateRows(att, T * c_.n_head, hd);
}

void Transformer::Attend(kernels::ThreadPool& pool, const kv::KvCache& cache, int l, const float* q, const float* k,
                         const float* v, int T, int pos0, const std::vector<int>& n_before, float* att, ForwardObserver* obs,
                         ForwardProfile* prof) const {
  const int hd = c_.head_dim, Hkv = c_.n_head_kv, G = c_.group();
  const int q_dim = c_.n_head * hd, kv_dim = Hkv * hd;
  const float scale = 1.f / std::sqrt(static_cast<float>(hd));
  const bool want = obs && obs->WantsProbs(l);
  if (T == 1 && !want && cache.type() != GgmlType::F32) return DecodeSplit(pool, cache, l, q, G, scale, att);
  if (T == 1) {
    size_t per_head = 0;
    for (int h = 0; h < Hkv; ++h) per_head = std::max<size_t>(per_head, static_cast<size_t>(G) * cache.head(l, h).size());
    std::vector<float> scratch(per_head * Hkv);  // decode attention scores [Hkv][G, n]
    pool.ParallelFor(Hkv, [&](int64_t h0, int64_t h1) {
      for (int64_t h = h0; h < h1; ++h) {
        kernels::TileObserver po = [&, h](const kernels::ProbTile& tile) {
          Span s(prof ? &prof->stats_thread_ns : nullptr);
          obs->OnProbTile(l, static_cast<int>(h), tile);
        };
        kernels::AttendOne(cache.head(l, h).View(), &q[h * G * hd], G, scale, &att[h * G * hd],
                           &scratch[per_head * h], want ? &po : nullptr);
      }
    });
    return;
  }
  // Per KV head: the output (attention) and, when a tap wants them, the
  // probability tiles (kernels/attention.h: kept and rescaled per query block
  // up to kKeepEntries entries, recomputed beyond); the taps' own work counts
  // as statistics. Queries before t_first are read by no tap (e.g. SnapKV
  // reads only its window).
  const int t_first = want ? static_cast<int>(std::clamp<int64_t>(obs->ProbsFrom(l) - pos0, 0, T)) : T;
  auto view_of = [&](int h) {
    kernels::KvView view = cache.head(l, h).View();
    view.bf16_tiles = cache.bf16_tiles();
    if (view.type != GgmlType::F32) {  // the batch's own rows in f32, as computed (KvView::k_tail)
      view.k_tail = &k[h * hd];
      view.v_tail = &v[h * hd];
      view.tail0 = n_before[h];
      view.tail_stride = kv_dim;
    }
    return view;
  };
  // Work in (head, query block) pairs, so 3 heads keep 2 threads busy; a
  // block starts at a multiple of CausalQueryBlock (the split is exact).
  const int qb = kernels::CausalQueryBlock(G), tb = qb * 4, nb = (T + tb - 1) / tb;
  auto off = [&](int h, int t0) { return static_cast<size_t>(t0) * q_dim + static_cast<size_t>(h) * G * hd; };
  if (t_first >= T) {  // no tap: every pair in parallel
    // About three pairs a thread (the pool hands them out as threads free
    // up): a call packs the bf16 tiles of the keys it sees once for all its
    // query blocks, so fewer, longer calls pack less (a 512-token batch on 3
    // heads and 2 threads: 6 calls, not 21).
    const int want = std::max(1, (3 * pool.size() + Hkv - 1) / Hkv);
    const int tbf = ((T + want - 1) / want + qb - 1) / qb * qb, nbf = (T + tbf - 1) / tbf;
    pool.ParallelFor(static_cast<int64_t>(Hkv) * nbf, [&](int64_t j0, int64_t j1) {
      for (int64_t j = j0; j < j1; ++j) {
        const int h = static_cast<int>(j / nbf), t0 = static_cast<int>(j % nbf) * tbf, t1 = std::min(T, t0 + tbf);
        kernels::AttendCausalMl(view_of(h), &q[off(h, t0)], t1 - t0, G, q_dim, n_before[h] + t0, scale,
                                &att[off(h, t0)], q_dim, nullptr);
      }
    });
    return;
  }
  // With a tap: each head's blocks in order (its tap is not thread-safe),
  // the heads' blocks spread over the threads (kernels/ordered_blocks.h).
  kernels::RunOrderedLanes(pool, Hkv, nb, [&](int h, int b) {
    const int t0 = b * tb, t1 = std::min(T, t0 + tb);
    kernels::AttendCausalTaps(view_of(h), &q[off(h, t0)], t1 - t0, G, q_dim, n_before[h] + t0, scale,
                              &att[off(h, t0)], q_dim,
                              [&](const kernels::ProbTile& tile) {
                                Span s(prof ? &prof->stats_thread_ns : nullptr);
                                kernels::ProbTile whole = tile;  // positions in the batch, not the block
                                whole.t0 += t0, whole.t1 += t0, whole.n_visible0 -= t0;
                                obs->OnProbTile(l, h, whole);
                              },
                              std::max(0, t_first - t0));
  });
}

Status Transformer::Forward(kernels::ThreadPool& pool, kv::KvCache& cache, const int* tokens, int T,
                            bool all_logits, std::vector<float>* logits, ForwardObserver* obs) const {
  if (T <= 0) return MakeError("empty batch");
  const int D = c_.dim, hd = c_.head_dim, H = c_.n_head, Hkv = c_.n_head_kv;
  const int q_dim = H * hd, kv_dim = Hkv * hd, F = c_.ffn_dim;
  for (int t = 0; t < T; ++t)
    if (tokens[t] < 0 || tokens[t] >= c_.vocab) return MakeError("token id " + std::to_string(tokens[t]) + " out of range");
  const int pos0 = static_cast<int>(cache.logical_length());
  if (obs) obs->OnBatch(pos0, T);
  ForwardProfile* prof = t_profile;
  Span total(prof ? &prof->total_ns : nullptr);
  if (prof) prof->tokens.fetch_add(T, std::memory_order_relaxed);
  auto matmul = [&pool, mm = prof ? &prof->matmul_ns : nullptr](const kernels::WeightView& w, const float* in, int n,
                                                                 float* out) {
    Span s(mm);
    kernels::MatMul(pool, w, in, n, out);
  };
  auto matmul_shared = [&pool, mm = prof ? &prof->matmul_ns : nullptr](
                           std::initializer_list<kernels::SharedProduct> products, const float* in, int n) {
    Span s(mm);
    kernels::MatMulShared(pool, products, in, n);
  };

  // Decode-sized batches reuse this thread's buffers (no allocation and
  // zeroing per token); large batches allocate, so a prefill's buffers are
  // not kept. Every buffer is fully written before it is read.
  struct Buffers {
    kernels::ScratchVector<float> x, xb, q, k, v, att, hg, hu;
    std::vector<float> rope_cs;
  };
  thread_local Buffers reused;
  Buffers fresh;
  Buffers& B = T <= 32 ? reused : fresh;
  B.x.resize(static_cast<size_t>(T) * D);       // [T, D] residual stream
  B.xb.resize(static_cast<size_t>(T) * D);      // [T, D] normed input
  B.q.resize(static_cast<size_t>(T) * q_dim);   // [T, H*hd]
  B.k.resize(static_cast<size_t>(T) * kv_dim);  // [T, Hkv*hd]
  B.v.resize(static_cast<size_t>(T) * kv_dim);
  B.att.resize(static_cast<size_t>(T) * q_dim);  // [T, H*hd] attention output
  B.hg.resize(static_cast<size_t>(T) * F);       // [T, F]
  B.hu.resize(static_cast<size_t>(T) * F);
  kernels::ScratchVector<float>&x = B.x, &xb = B.xb, &q = B.q, &k = B.k, &v = B.v, &att = B.att, &hg = B.hg, &hu = B.hu;
  std::vector<float> k_pre;    // [T, Hkv*hd] pre-RoPE keys, only when a tap asks

  std::vector<float>& rope_cs = B.rope_cs;  // [T, rope dims] (cos, sin) of the batch's positions, for every layer
  rope_.Table(static_cast<int>(cache.rope_length()), T, &rope_cs);  // pos0 itself after no re-base (kv/rope_map.h)

  for (int t = 0; t < T; ++t) kernels::DequantRow(w_.tok_embd.type, w_.tok_embd.row(tokens[t]), &x[t * D], D);

  for (int l = 0; l < c_.n_layer; ++l) {
    const LayerWeights& L = w_.layers[l];
    for (int t = 0; t < T; ++t) kernels::RmsNorm(&x[t * D], L.attn_norm.data(), D, c_.rms_eps, &xb[t * D]);
    if (obs && obs->WantsHiddenNorms()) ReportHiddenNorms(*obs, l, xb.data(), T, D);
    matmul_shared({{&L.wq, q.data()}, {&L.wk, k.data()}, {&L.wv, v.data()}}, xb.data(), T);
    AddBias(q.data(), L.bq, T);
    AddBias(k.data(), L.bk, T);
    AddBias(v.data(), L.bv, T);
    const bool want_qk = obs && obs->WantsQK();
    if (want_qk) k_pre.assign(k.begin(), k.end());  // [T, Hkv*hd] before rotation
    if (obs && obs->WantsQPre()) obs->OnQPre(l, q.data(), T);
    for (int t = 0; t < T; ++t) {
      const float* cs = rope_cs.data() + static_cast<size_t>(t) * rope_.table_stride();
      rope_.ApplyTable(&q[t * q_dim], H, hd, cs);
      rope_.ApplyTable(&k[t * kv_dim], Hkv, hd, cs);
    }
    if (want_qk) obs->OnQK(l, k_pre.data(), q.data(), T);
    if (obs) KVTRIM_RETURN_IF_ERROR(obs->BeforeAttend(l));

    {
      Span s(prof ? &prof->attention_ns : nullptr);  // the taps' share is taken out when reported
      AppendAndAttend(pool, cache, l, q.data(), k.data(), v.data(), T, pos0, att.data(), obs, prof);
    }
    if (!logits && l == c_.n_layer - 1) break;  // nothing reads the last layer's output
    matmul(L.wo, att.data(), T, xb.data());
    for (size_t i = 0; i < x.size(); ++i) x[i] += xb[i];

    for (int t = 0; t < T; ++t) kernels::RmsNorm(&x[t * D], L.ffn_norm.data(), D, c_.rms_eps, &xb[t * D]);
    matmul_shared({{&L.w_gate, hg.data()}, {&L.w_up, hu.data()}}, xb.data(), T);
    kernels::SwiGlu(hg.data(), hu.data(), T * F);
    matmul(L.w_down, hg.data(), T, xb.data());
    for (size_t i = 0; i < x.size(); ++i) x[i] += xb[i];
  }
  cache.AdvanceLogical(T);
  if (!logits) return {};

  const int t_first = all_logits ? 0 : T - 1, n_out = T - t_first;
  for (int t = t_first; t < T; ++t) kernels::RmsNorm(&x[t * D], w_.output_norm.data(), D, c_.rms_eps, &xb[(t - t_first) * D]);
  logits->resize(static_cast<size_t>(n_out) * c_.vocab);
  matmul(w_.output, xb.data(), n_out, logits->data());
  return {};
}

}  // namespace kvtrim::model
