#include "kernels/attention.h"

#include "kernels/eigen_core.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/attention_bf16.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "kernels/scratch.h"

#include "kernels/targets.h"
#if KVTRIM_BUILD_AVX2_FMA
#include "kernels/hsum.h"
#endif

namespace kvtrim::kernels {
namespace {

inline float DotF32(const float* a, const float* b, int d) {
#ifdef KVTRIM_BUILD_AVX2_FMA
  __m256 acc = _mm256_mul_ps(_mm256_loadu_ps(a), _mm256_loadu_ps(b));
  for (int i = 8; i < d; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  return Hsum8(acc);
#else
  float acc = 0.f;
  for (int i = 0; i < d; ++i) acc += a[i] * b[i];
  return acc;
#endif
}

// d a multiple of 8 (and at most kMaxRow for block types): the whole step
// inlined. F32 rows are read in place; other rows are dequantized once per
// entry into a small buffer and shared by the group's query heads.
constexpr int kMaxRow = 512;

void AttendOneFast(const KvView& kv, const float* q, int G, float scale, float* out, float* scratch,
                   const TileObserver* obs) {
  const int n = kv.n, d = kv.d;
  const bool f32 = kv.type == GgmlType::F32;
  float buf[kMaxRow];
  auto row = [&](const uint8_t* base, int j) -> const float* {
    const uint8_t* r = base + kv.row_bytes * j;
    if (f32) return reinterpret_cast<const float*>(r);
    DequantRow(kv.type, r, buf, d);
    return buf;
  };
  for (int j = 0; j < n; ++j) {  // scores: each key row read once for the group
    const float* k = row(kv.k, j);
    for (int g = 0; g < G; ++g) scratch[static_cast<size_t>(g) * n + j] = DotF32(k, q + g * d, d) * scale + kv.logw[j];
  }
  for (int g = 0; g < G; ++g) Softmax(scratch + static_cast<size_t>(g) * n, n);
  if (obs) (*obs)(WholeTile(scratch, G, n));
  std::fill(out, out + G * d, 0.f);
  for (int j = 0; j < n; ++j) {  // values: each row read once for the group
    const float* v = row(kv.v, j);
    for (int g = 0; g < G; ++g) {
      const float a = scratch[static_cast<size_t>(g) * n + j];
      float* o = out + g * d;
      for (int i = 0; i < d; ++i) o[i] += a * v[i];  // vectorized by the compiler
    }
  }
}


// Query rows per block of the causal pass (queries x G).
constexpr int kQueryRows = 64;

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using CMap = Eigen::Map<const RowMat, 0, Eigen::OuterStride<>>;
using MMap = Eigen::Map<RowMat, 0, Eigen::OuterStride<>>;

// The key (0) and value (1) panels of the bf16 tiles: this thread's, kept
// between calls. A call (one head's block of queries) packs every tile its
// block sees, up to the whole cache; fresh panels per call were allocated,
// zeroed and faulted in every time (most of a one-shot 8k reference pass's
// time went to page faults, memset and memmove). One CausalPass at a time
// per thread uses them. Their size is bounded by the longest pass: 2 x n x
// d bytes each.
ScratchVector<uint32_t>& ThreadPanel(int which) {
  thread_local ScratchVector<uint32_t> panels[2];
  return panels[which];
}

// One head's causal pass, tiled over keys (flash-attention style, on the
// CPU): for a block of query rows, every key tile [j0, j0 + bk) the block can
// see is scored by a GEMM, scaled, given its log-weights and masked, and its
// exp(s - m) is added into the output accumulator with P.V, where m is the
// row's running max; when a tile raises the max, the accumulator and the sum
// are first multiplied by exp(m_old - m_new). After the last tile the output
// is divided by the sum. Scratch: [rows, d] queries and output, [rows, bk]
// scores, and for non-F32 caches one [bk, d] key and value tile (dequantized
// one tile at a time), whatever n is.
struct CausalPass {
  const KvView& kv;
  int G, n_visible0, bk, d;
  float scale;
  int n_total = 0;
  std::vector<float> qb, ob, s, kt, vt, m, l;
  // bf16 tiles (KvView::bf16_tiles): the block's queries, P's rows, and each
  // key tile's key and value panels, packed once per call and repacked only
  // when a later block sees more of the tile (its width in k_w, v_w).
  bool bf16 = false;
  std::vector<uint32_t> qp, pp;
  ScratchVector<uint32_t>& kp = ThreadPanel(0);
  ScratchVector<uint32_t>& vp = ThreadPanel(1);
  std::vector<int> k_w, v_w;  // this call's packed widths: every tile is packed on first use

  // Scratch sized for blocks of up to T queries (decode: T = 1, G rows).
  CausalPass(const KvView& v, int g, int nv0, float sc, int tile, int T)
      : kv(v), G(g), n_visible0(nv0), bk(tile), d(v.d), scale(sc) {
    const int rows = std::min(std::max(1, kQueryRows / G), std::max(T, 1)) * G;
    bf16 = v.bf16_tiles && T * G >= kBf16MinRows && Bf16TileDim(d) && HasBf16Tiles();
    if (bf16) {
      qp.resize(static_cast<size_t>(rows) * d / 2);
      pp.resize(static_cast<size_t>(rows) * ((bk + 1) / 2));
    }
    qb.resize(static_cast<size_t>(rows) * d);
    ob.resize(static_cast<size_t>(rows) * d);
    s.resize(static_cast<size_t>(rows) * bk);
    m.resize(rows);
    l.resize(rows);
    if (kv.type != GgmlType::F32) {
      kt.resize(static_cast<size_t>(bk) * d);
      vt.resize(static_cast<size_t>(bk) * d);
    }
  }

  // Float rows [j0, j0 + w) of keys or values: in place for F32, else
  // dequantized into buf (rows of the f32 tail copied: KvView::k_tail).
  const float* Rows(const uint8_t* base, const float* tail, int j0, int w, std::vector<float>& buf) const {
    if (kv.type == GgmlType::F32) return reinterpret_cast<const float*>(base + kv.row_bytes * j0);
    const int stored = tail ? std::clamp(kv.tail0 - j0, 0, w) : w;  // rows before the tail
    DequantRows(kv.type, base + kv.row_bytes * j0, kv.row_bytes, stored, buf.data(), d);
    for (int j = stored; j < w; ++j)
      std::copy_n(tail + static_cast<size_t>(j0 + j - kv.tail0) * kv.tail_stride, d, &buf[static_cast<size_t>(j) * d]);
    return buf.data();
  }

  int Visible(int t) const { return std::min(n_total, n_visible0 + t + 1); }

  // The tile of queries [t0, t1) x entries [j0, j0 + w) held in s.
  ProbTile TileOfScores(int t0, int t1, int j0, int w) const {
    ProbTile tile;
    tile.t0 = t0;
    tile.t1 = t1;
    tile.G = G;
    tile.j0 = j0;
    tile.j1 = j0 + w;
    tile.p = s.data();
    tile.ld = bk;
    tile.n_visible0 = n_visible0;
    tile.n = n_total;
    return tile;
  }

  // s[rows, w] = Q K^T over the tile (row stride bk); scale, log-weights
  // and the mask (entries j >= Visible(t)) are the caller's, per row.
  void Scores(int rows, int j0, int w) {
    if (bf16) return ScoresBf16(qp.data(), rows, Panel(kv.k, kv.k_tail, j0, w, true), w, d, s.data(), bk);
    const float* K = Rows(kv.k, kv.k_tail, j0, w, kt);
    GemmABt(rows, w, d, qb.data(), d, K, d, s.data(), bk);
  }

  // The bf16 key (keys) or value panel of the tile at j0, at least w wide.
  const uint32_t* Panel(const uint8_t* base, const float* tail, int j0, int w, bool keys) {
    ScratchVector<uint32_t>& panel = keys ? kp : vp;
    std::vector<int>& width = keys ? k_w : v_w;
    const size_t t = static_cast<size_t>(j0 / bk);
    const size_t words = keys ? Bf16KeyPanelWords(bk, d) : Bf16ValuePanelWords(bk, d);
    if (t >= width.size()) {
      width.resize(t + 1, 0);
      panel.resize((t + 1) * words);
    }
    uint32_t* dst = &panel[t * words];
    if (width[t] < w) {
      const float* rows = Rows(base, tail, j0, w, keys ? kt : vt);
      if (keys) PackKeysBf16(rows, w, d, dst);
      else PackValuesBf16(rows, w, d, dst);
      width[t] = w;
    }
    return dst;
  }

  // O[rows, d] += P V over the tile's values (P: the exp tile in s).
  void AddPv(int rows, int j0, int w) {
    if (bf16) return AccumulatePvBf16(s.data(), rows, bk, Panel(kv.v, kv.v_tail, j0, w, false), w, d, ob.data(), d, pp.data());
    const float* V = Rows(kv.v, kv.v_tail, j0, w, vt);
    MMap O(ob.data(), rows, d, Eigen::OuterStride<>(d));
    O.noalias() += CMap(s.data(), rows, w, Eigen::OuterStride<>(bk)) * CMap(V, w, d, Eigen::OuterStride<>(d));
  }

  // The block's queries (qb) as bf16 pairs, when the tiles are bf16.
  void PackQueries(int rows) {
    if (bf16) PackRowsBf16(qb.data(), rows, d, d, qp.data());
  }

  // Scaled, biased scores of row r over its `vis` visible entries of the
  // tile (in place) and their max.
  float ScaleRow(float* row, int j0, int vis) const {
    float mt = -INFINITY;
    int j = 0;
    const float* b = kv.logw + j0;
#ifdef KVTRIM_BUILD_AVX2_FMA
    if (vis >= 8) {
      const __m256 vs = _mm256_set1_ps(scale);
      __m256 vm = _mm256_set1_ps(-INFINITY);
      for (; j + 8 <= vis; j += 8) {
        const __m256 x = _mm256_fmadd_ps(_mm256_loadu_ps(row + j), vs, _mm256_loadu_ps(b + j));
        _mm256_storeu_ps(row + j, x);
        vm = _mm256_max_ps(vm, x);
      }
      __m128 h = _mm_max_ps(_mm256_castps256_ps128(vm), _mm256_extractf128_ps(vm, 1));
      h = _mm_max_ps(h, _mm_movehl_ps(h, h));
      h = _mm_max_ss(h, _mm_movehdup_ps(h));
      mt = _mm_cvtss_f32(h);
    }
#endif
    for (; j < vis; ++j) {
      row[j] = row[j] * scale + b[j];
      mt = std::max(mt, row[j]);
    }
    return mt;
  }

  // Online-softmax update of row r with the tile's scores (turned into
  // exp(s - m_new) in place, masked entries 0).
  void UpdateRow(int r, float* row, int j0, int w, int vis) {
    const float mt = ScaleRow(row, j0, vis);
    const float m_new = std::max(m[r], mt);
    if (m_new == -INFINITY) {  // nothing with weight seen yet: p = 0, sum and output stay 0
      std::fill(row, row + w, 0.f);
      return;
    }
    const float sum = vis > 0 ? ExpShiftSum(row, vis, m_new) : 0.f;
    std::fill(row + std::max(vis, 0), row + w, 0.f);
    Advance(r, m_new, sum);
  }

  // The row's running max becomes m_new (the output and sum scaled by
  // exp(m_old - m_new) first) and the tile's sum is added.
  void Advance(int r, float m_new, float sum) {
    if (m_new != m[r]) {  // exp(-inf - m_new) = 0 for the first tile with weight
      const float alpha = std::exp(m[r] - m_new);
      float* o = &ob[static_cast<size_t>(r) * d];
      for (int i = 0; i < d; ++i) o[i] *= alpha;
      l[r] *= alpha;
      m[r] = m_new;
    }
    l[r] += sum;
  }

  // UpdateRow for bf16 tiles outside the taps: the scale, the max, the exps
  // and their bf16 rounding in one function (SoftmaxRowBf16), the
  // probabilities written straight into pp's row for the P V tile (one pass
  // over the scores instead of three; nothing needs them in f32 here).
  void UpdateRowPacked(int r, const float* row, int j0, int w, int vis) {
    float m_new;
    const float sum = SoftmaxRowBf16(row, vis, w, scale, kv.logw + j0, m[r], &m_new,
                                     &pp[static_cast<size_t>(r) * ((w + 1) / 2)]);
    if (m_new != -INFINITY) Advance(r, m_new, sum);
  }

  // Kept exp tiles of the current block (Keep): pk [rows, ld_keep] holds
  // exp(s - m_k) of every visible entry, m_k the row's running max at tile
  // k (mk [rows, tiles]); rescaled after the block by exp(m_k - m) / l.
  std::vector<float> pk, mk;
  int ld_keep = 0, keep_tiles = 0;

  // The block's queries [t0, t1) (rows in qb) into ob, normalized; with keep,
  // each tile's exp values are also copied into pk (the output is computed
  // the same way either way).
  void Block(int t0, int t1, bool keep = false) {
    const int rows = (t1 - t0) * G;
    const int nv = Visible(t1 - 1);  // entries seen by the block's last query; tiles past it are skipped
    const bool packed = bf16 && !keep;  // probabilities straight to bf16 (the taps keep theirs in f32)
    PackQueries(rows);
    std::fill(ob.begin(), ob.begin() + static_cast<size_t>(rows) * d, 0.f);
    std::fill(m.begin(), m.begin() + rows, -INFINITY);
    std::fill(l.begin(), l.begin() + rows, 0.f);
    for (int j0 = 0; j0 < nv; j0 += bk) {
      const int w = std::min(bk, nv - j0);
      Scores(rows, j0, w);
      for (int t = t0; t < t1; ++t) {
        const int vis = std::min(w, Visible(t) - j0);
        for (int g = 0; g < G; ++g) {
          const int r = (t - t0) * G + g;
          float* row = &s[static_cast<size_t>(r) * bk];
          packed ? UpdateRowPacked(r, row, j0, w, vis) : UpdateRow(r, row, j0, w, vis);
        }
      }
      if (keep)
        for (int r = 0; r < rows; ++r) {
          std::copy(&s[static_cast<size_t>(r) * bk], &s[static_cast<size_t>(r) * bk] + w,
                    &pk[static_cast<size_t>(r) * ld_keep + j0]);
          mk[static_cast<size_t>(r) * keep_tiles + j0 / bk] = m[r];
        }
      if (packed) AccumulatePackedPvBf16(pp.data(), rows, Panel(kv.v, kv.v_tail, j0, w, false), w, d, ob.data(), d);
      else AddPv(rows, j0, w);
    }
    for (int r = 0; r < rows; ++r) {
      const float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;  // all -inf: output 0, no NaN
      for (int i = 0; i < d; ++i) ob[static_cast<size_t>(r) * d + i] *= inv;
    }
  }

  // Block with the taps, when the block sees at most kKeepEntries entries:
  // the output as Block computes it, then the kept exp tiles rescaled by
  // exp(m_k - m) / l (m, l: the rows' final max and sum) and handed to obs
  // in the order Tap hands them; no second Q K^T or exp over the tile.
  void BlockKeep(int t0, int t1, const TileObserver& obs) {
    const int rows = (t1 - t0) * G, nv = Visible(t1 - 1);
    keep_tiles = (nv + bk - 1) / bk;
    ld_keep = keep_tiles * bk;
    pk.resize(static_cast<size_t>(rows) * ld_keep);
    mk.resize(static_cast<size_t>(rows) * keep_tiles);
    Block(t0, t1, true);
    for (int j0 = 0, k = 0; j0 < nv; j0 += bk, ++k) {
      const int w = std::min(bk, nv - j0);
      for (int r = 0; r < rows; ++r) {
        const float mt = mk[static_cast<size_t>(r) * keep_tiles + k];
        const float f = l[r] > 0.f && mt != -INFINITY ? std::exp(mt - m[r]) / l[r] : 0.f;
        const float* src = &pk[static_cast<size_t>(r) * ld_keep + j0];
        float* dst = &s[static_cast<size_t>(r) * bk];
        for (int j = 0; j < w; ++j) dst[j] = src[j] * f;
      }
      obs(TileOfScores(t0, t1, j0, w));
    }
  }

  // The taps' pass over the same key tiles (m, l: the rows' final max and
  // sum). Normalized probabilities need the final max and sum, known only
  // after a row's last tile, so they cannot be handed out during the output
  // pass; the scores are recomputed here (one more Q K^T GEMM and exp per
  // tile) rather than kept: keeping them would be the [rows, n] block this
  // kernel avoids. This pass only reads kv and q; the output is not touched.
  void Tap(int t0, int t1, const TileObserver& obs) {
    const int rows = (t1 - t0) * G;
    const int nv = Visible(t1 - 1);
    // exp(s - m) / l as one exp(s - (m + log l)): no pass to normalize.
    PackQueries(rows);
    for (int r = 0; r < rows; ++r) m[r] = l[r] > 0.f ? m[r] + std::log(l[r]) : -INFINITY;
    for (int j0 = 0; j0 < nv; j0 += bk) {
      const int w = std::min(bk, nv - j0);
      Scores(rows, j0, w);
      for (int t = t0; t < t1; ++t) {
        const int vis = std::min(w, Visible(t) - j0);
        for (int g = 0; g < G; ++g) {
          const int r = (t - t0) * G + g;
          float* row = &s[static_cast<size_t>(r) * bk];
          ScaleRow(row, j0, vis);
          if (m[r] == -INFINITY || vis <= 0) {
            std::fill(row, row + w, 0.f);
            continue;
          }
          ExpShiftSum(row, vis, m[r]);
          std::fill(row + vis, row + w, 0.f);
        }
      }
      obs(TileOfScores(t0, t1, j0, w));
    }
  }
};

}  // namespace

ProbTile WholeTile(const float* p, int G, int n) {
  ProbTile tile;
  tile.t0 = 0;
  tile.t1 = 1;
  tile.G = G;
  tile.j0 = 0;
  tile.j1 = n;
  tile.p = p;
  tile.ld = n;
  tile.n_visible0 = n - 1;
  tile.n = n;
  return tile;
}

void AttendOne(const KvView& kv, const float* q, int G, float scale, float* out, float* scratch,
               const TileObserver* obs) {
  if (kv.type != GgmlType::F32 && AttendOneTiled(kv, q, G, scale, out, scratch, obs)) return;
  if (kv.d % 8 == 0 && (kv.type == GgmlType::F32 || kv.d <= kMaxRow)) {
    return AttendOneFast(kv, q, G, scale, out, scratch, obs);
  }
  const int n = kv.n, d = kv.d;
  for (int j = 0; j < n; ++j) {  // scores, key rows read once for the group
    const uint8_t* krow = kv.k + kv.row_bytes * j;
    const float b = kv.logw[j];
    for (int g = 0; g < G; ++g) scratch[g * n + j] = DotRow(kv.type, krow, q + g * d, d) * scale + b;
  }
  for (int g = 0; g < G; ++g) Softmax(scratch + g * n, n);
  if (obs) (*obs)(WholeTile(scratch, G, n));
  std::fill(out, out + G * d, 0.f);
  for (int j = 0; j < n; ++j) {
    const uint8_t* vrow = kv.v + kv.row_bytes * j;
    for (int g = 0; g < G; ++g) AxpyRow(kv.type, vrow, scratch[g * n + j], out + g * d, d);
  }
}

namespace {

// Copies the block's queries [t0, t1) into c.qb: [rows, d], row = (t - t0) * G + g.
void LoadQueries(CausalPass& c, const float* q, int q_stride, int t0, int t1) {
  const int gd = c.G * c.d;
  for (int t = t0; t < t1; ++t)
    std::copy(q + static_cast<size_t>(t) * q_stride, q + static_cast<size_t>(t) * q_stride + gd,
              &c.qb[static_cast<size_t>(t - t0) * gd]);
}

}  // namespace

int CausalQueryBlock(int G) { return std::max(1, kQueryRows / G); }

void AttendCausalMl(const KvView& kv, const float* q, int T, int G, int q_stride, int n_visible0, float scale,
                    float* out, int out_stride, float* row_ml, int key_tile) {
  CausalPass c(kv, G, n_visible0, scale, key_tile > 0 ? key_tile : kAttentionKeyTile, T);
  c.n_total = std::min(kv.n, n_visible0 + T);
  const int Tb = CausalQueryBlock(G), gd = G * kv.d;
  for (int t0 = 0; t0 < T; t0 += Tb) {
    const int t1 = std::min(T, t0 + Tb), rows = (t1 - t0) * G;
    LoadQueries(c, q, q_stride, t0, t1);
    c.Block(t0, t1);
    for (int t = t0; t < t1; ++t)
      std::copy(&c.ob[static_cast<size_t>(t - t0) * gd], &c.ob[static_cast<size_t>(t - t0 + 1) * gd],
                out + static_cast<size_t>(t) * out_stride);
    if (row_ml)
      for (int r = 0; r < rows; ++r) {
        row_ml[2 * (static_cast<size_t>(t0) * G + r)] = c.m[r];
        row_ml[2 * (static_cast<size_t>(t0) * G + r) + 1] = c.l[r];
      }
  }
}

void TapCausal(const KvView& kv, const float* q, int T, int G, int q_stride, int n_visible0, float scale,
               const float* row_ml, const TileObserver& obs, int key_tile, int t_first) {
  CausalPass c(kv, G, n_visible0, scale, key_tile > 0 ? key_tile : kAttentionKeyTile, T);
  c.n_total = std::min(kv.n, n_visible0 + T);
  const int Tb = std::max(1, kQueryRows / G);
  for (int t0 = 0; t0 < T; t0 += Tb) {
    const int t1 = std::min(T, t0 + Tb), rows = (t1 - t0) * G;
    if (t1 <= t_first) continue;
    LoadQueries(c, q, q_stride, t0, t1);
    for (int r = 0; r < rows; ++r) {
      c.m[r] = row_ml[2 * (static_cast<size_t>(t0) * G + r)];
      c.l[r] = row_ml[2 * (static_cast<size_t>(t0) * G + r) + 1];
    }
    c.Tap(t0, t1, obs);
  }
}

void AttendCausalTaps(const KvView& kv, const float* q, int T, int G, int q_stride, int n_visible0, float scale,
                      float* out, int out_stride, const TileObserver& obs, int t_first, int key_tile) {
  CausalPass c(kv, G, n_visible0, scale, key_tile > 0 ? key_tile : kAttentionKeyTile, T);
  c.n_total = std::min(kv.n, n_visible0 + T);
  const int Tb = std::max(1, kQueryRows / G), gd = G * kv.d;
  for (int t0 = 0; t0 < T; t0 += Tb) {
    const int t1 = std::min(T, t0 + Tb);
    LoadQueries(c, q, q_stride, t0, t1);
    const bool tapped = t1 > t_first, keep = tapped && c.Visible(t1 - 1) <= kKeepEntries;
    if (keep) c.BlockKeep(t0, t1, obs);
    else c.Block(t0, t1);
    for (int t = t0; t < t1; ++t)
      std::copy(&c.ob[static_cast<size_t>(t - t0) * gd], &c.ob[static_cast<size_t>(t - t0 + 1) * gd],
                out + static_cast<size_t>(t) * out_stride);
    if (tapped && !keep) c.Tap(t0, t1, obs);  // long contexts: recompute (scratch stays O(tile))
  }
}

KvView SubView(const KvView& kv, int j0, int n) {
  KvView s = kv;
  s.k = kv.k + kv.row_bytes * j0;
  s.v = kv.v + kv.row_bytes * j0;
  s.logw = kv.logw + j0;
  s.n = n;
  s.tail0 = kv.tail0 - j0;
  return s;
}

void AttendCausal(const KvView& kv, const float* q, int T, int G, int q_stride, int n_visible0, float scale,
                  float* out, int out_stride, const TileObserver* obs, int key_tile) {
  if (!obs) return AttendCausalMl(kv, q, T, G, q_stride, n_visible0, scale, out, out_stride, nullptr, key_tile);
  AttendCausalTaps(kv, q, T, G, q_stride, n_visible0, scale, out, out_stride, *obs, 0, key_tile);
}

}  // namespace kvtrim::kernels
