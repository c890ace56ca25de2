#include "kv/cache.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/hadamard.h"
#include "kernels/quant.h"
#include "kv/numerics/cardinality.h"
#include "kv/plan.h"

namespace kvtrim::kv {

namespace {
// Growth step during decode: at least 16 entries, at most ~1/16 of the head,
// so the slack held stays small while reallocation copies stay amortized.
int GrowStep(int n) { return std::max(16, n / 16); }
}

size_t HeadStore::row_bytes() const { return kernels::RowBytesPadded(type_, d_); }

void HeadStore::Reserve(int n) {
  if (n > cap_) Realloc(n);
}

void HeadStore::Grow(int need) {
  if (need <= cap_) return;
  const int step = GrowStep(n_);
  Realloc((need + step - 1) / step * step);
}

// Moves the entries into buffers of exactly `cap` entries, so the bytes
// reported are the bytes allocated (std::vector growth would over-allocate).
void HeadStore::Realloc(int cap) {
  const size_t rb = row_bytes();
  kernels::StreamedVector<uint8_t> k(rb * cap), v(rb * cap);
  std::copy(k_.begin(), k_.begin() + rb * n_, k.begin());
  std::copy(v_.begin(), v_.begin() + rb * n_, v.begin());
  k_.swap(k);
  v_.swap(v);
  std::vector<int32_t> p;
  p.reserve(cap);
  p.assign(pos_.begin(), pos_.end());
  pos_.swap(p);
  std::vector<float> b;
  b.reserve(cap);
  b.assign(logw_.begin(), logw_.end());
  logw_.swap(b);
  cap_ = cap;
}

void HeadStore::Store(const float* x, uint8_t* row) {
  if (!rotated_) return kernels::QuantizeRow(type_, x, row, d_);
  thread_local std::vector<float> r;
  r.assign(x, x + d_);
  kernels::RotateRows(r.data(), 1, d_);
  kernels::QuantizeRow(type_, r.data(), row, d_);
}

void HeadStore::Load(const uint8_t* row, float* out) const {
  kernels::DequantRow(type_, row, out, d_);
  if (rotated_) kernels::UnrotateRows(out, 1, d_);
}

void HeadStore::Append(const float* k, const float* v, int32_t pos, float logw) {
  Grow(n_ + 1);
  Store(k, k_.data() + row_bytes() * n_);
  Store(v, v_.data() + row_bytes() * n_);
  pos_.push_back(pos);
  logw_.push_back(logw);
  ++n_;
}

void HeadStore::Retain(const std::vector<int>& keep) {
  const size_t rb = row_bytes();
  int w = 0;
  // Move runs of consecutive kept entries with one memmove each.
  for (size_t a = 0; a < keep.size();) {
    size_t b = a + 1;
    while (b < keep.size() && keep[b] == keep[b - 1] + 1) ++b;
    const int src = keep[a], len = static_cast<int>(b - a);
    if (src != w) {
      std::memmove(k_.data() + rb * w, k_.data() + rb * src, rb * len);
      std::memmove(v_.data() + rb * w, v_.data() + rb * src, rb * len);
      std::memmove(pos_.data() + w, pos_.data() + src, sizeof(int32_t) * len);
      std::memmove(logw_.data() + w, logw_.data() + src, sizeof(float) * len);
    }
    w += len;
    a = b;
  }
  n_ = w;
  pos_.resize(n_);
  logw_.resize(n_);
  // Free the memory, unless the slack is within one growth step (decode-time
  // eviction of a few entries would otherwise reallocate every step).
  if (cap_ - n_ > GrowStep(n_)) ShrinkToFit();
}

void HeadStore::Truncate(int n) {
  n_ = std::clamp(n, 0, n_);
  pos_.resize(n_);
  logw_.resize(n_);
}

void HeadStore::ShrinkToFit() {
  if (cap_ != n_) Realloc(n_);
}

std::vector<std::vector<int>> HeadStore::Apply(const Plan& plan) {
  if (plan.noop) return {};
  for (const auto& [i, b] : plan.set_logw) logw_[i] = b;
  for (const auto& [i, v] : plan.set_value) WriteValue(i, v.data());
  for (const auto& [i, k] : plan.set_key) WriteKey(i, k.data());
  if (plan.merge.empty() && plan.add.empty()) {  // eviction only: compact in place
    Retain(plan.keep);
    return {};
  }
  struct Out {
    double pos;
    std::vector<int> from;
    SyntheticEntry made;  // merged or synthetic entries
  };
  std::vector<Out> out;
  out.reserve(plan.keep.size() + plan.merge.size() + plan.add.size());
  for (int i : plan.keep) out.push_back({static_cast<double>(pos_[i]), {i}, {}});
  std::vector<float> row(d_);
  std::vector<double> b, cw;
  for (const MergeEntry& m : plan.merge) {
    b.resize(m.sources.size());
    Out o{0.0, m.sources, {std::vector<float>(d_, 0.f), std::vector<float>(d_, 0.f), 0, 0.f}};
    double pos = 0;
    for (size_t s = 0; s < m.sources.size(); ++s) b[s] = logw_[m.sources[s]];
    // c_i / sum c with the largest b shifted out: finite even when every
    // cardinality underflows (uniform when all are zero).
    const double log_card = numerics::CardinalityWeights(b, &cw);
    for (size_t s = 0; s < m.sources.size(); ++s) {
      const int i = m.sources[s];
      const double c = cw[s];
      const double wk = m.key_weights.empty() ? c : m.key_weights[s];
      ReadKey(i, row.data());
      for (int j = 0; j < d_; ++j) o.made.k[j] += static_cast<float>(wk * row[j]);
      ReadValue(i, row.data());
      for (int j = 0; j < d_; ++j) o.made.v[j] += static_cast<float>(c * row[j]);
      pos += c * pos_[i];
    }
    o.pos = pos;
    o.made.pos = static_cast<int32_t>(std::lround(pos));
    o.made.logw = static_cast<float>(log_card);
    out.push_back(std::move(o));
  }
  for (const SyntheticEntry& e : plan.add) out.push_back({static_cast<double>(e.pos), {}, e});
  // Stable: kept entries are already in order; new ones slot in by position.
  std::stable_sort(out.begin(), out.end(), [](const Out& a, const Out& b) { return a.pos < b.pos; });
  HeadStore next(d_, type_, rotated_);
  next.Reserve(static_cast<int>(out.size()));
  std::vector<std::vector<int>> from;
  from.reserve(out.size());
  for (Out& o : out) {
    if (o.from.size() == 1 && o.made.k.empty()) {  // a kept entry: copy its stored rows as they are
      next.AppendStored(key_row(o.from[0]), value_row(o.from[0]), pos_[o.from[0]], logw_[o.from[0]]);
    } else {
      next.Append(o.made.k.data(), o.made.v.data(), o.made.pos, o.made.logw);
    }
    from.push_back(std::move(o.from));
  }
  *this = std::move(next);
  return from;
}

void HeadStore::AppendStored(const uint8_t* k, const uint8_t* v, int32_t pos, float logw) {
  Grow(n_ + 1);
  std::memcpy(k_.data() + row_bytes() * n_, k, row_bytes());
  std::memcpy(v_.data() + row_bytes() * n_, v, row_bytes());
  pos_.push_back(pos);
  logw_.push_back(logw);
  ++n_;
}

void HeadStore::Convert(GgmlType type, bool rotated) {
  if (type == type_ && rotated == rotated_) return;
  HeadStore out(d_, type, rotated);
  out.Reserve(n_);
  std::vector<float> k(d_), v(d_);
  for (int i = 0; i < n_; ++i) {
    ReadKey(i, k.data());
    ReadValue(i, v.data());
    out.Append(k.data(), v.data(), pos_[i], logw_[i]);
  }
  *this = std::move(out);
}

void HeadStore::ReadKey(int i, float* out) const { Load(key_row(i), out); }
void HeadStore::ReadValue(int i, float* out) const { Load(value_row(i), out); }
void HeadStore::WriteKey(int i, const float* k) { Store(k, k_.data() + row_bytes() * i); }
void HeadStore::WriteValue(int i, const float* v) { Store(v, v_.data() + row_bytes() * i); }

kernels::KvView HeadStore::View() const {
  return {type_, k_.data(), v_.data(), row_bytes(), logw_.data(), n_, d_};
}

size_t HeadStore::BytesHeld() const {
  return k_.capacity() + v_.capacity() + pos_.capacity() * sizeof(int32_t) + logw_.capacity() * sizeof(float);
}

size_t HeadStore::BytesUsed() const {
  return static_cast<size_t>(n_) * (2 * row_bytes() + sizeof(int32_t) + sizeof(float));
}

KvCache::KvCache(int n_layer, int n_head_kv, int head_dim, GgmlType type, bool rotated)
    : n_layer_(n_layer), n_head_kv_(n_head_kv), head_dim_(head_dim), type_(type), rotated_(rotated) {
  heads_.assign(static_cast<size_t>(n_layer) * n_head_kv, HeadStore(head_dim, type, rotated));
}

void KvCache::Convert(GgmlType type, bool rotated) {
  // Rows already in the type stay as they are, rotated or not (a context
  // loaded from a file written unrotated is not quantized a second time).
  if (type == type_) return;
  for (auto& h : heads_) h.Convert(type, rotated);
  type_ = type;
  rotated_ = rotated;
}

void KvCache::ReserveMore(int tokens) {
  for (auto& h : heads_) h.Reserve(h.size() + std::max(tokens, 0));
}

size_t KvCache::BytesHeld() const {
  size_t s = 0;
  for (const auto& h : heads_) s += h.BytesHeld();
  return s;
}

size_t KvCache::BytesUsed() const {
  size_t s = 0;
  for (const auto& h : heads_) s += h.BytesUsed();
  return s;
}

size_t KvCache::BytesFull() const {
  size_t per_entry = 2 * sizeof(float) * head_dim_ + sizeof(int32_t) + sizeof(float);
  return per_entry * static_cast<size_t>(n_logical_) * heads_.size();
}

size_t KvCache::BytesFull(GgmlType type) const {
  size_t per_entry = 2 * kernels::RowBytesPadded(type, head_dim_) + sizeof(int32_t) + sizeof(float);
  return per_entry * static_cast<size_t>(n_logical_) * heads_.size();
}

size_t KvCache::EntriesHeld() const {
  size_t s = 0;
  for (const auto& h : heads_) s += h.size();
  return s;
}

}  // namespace kvtrim::kv
