#include "kv/cache.h"

#include <algorithm>
#include <cstring>

#include "kernels/quant.h"

namespace kvtrim::kv {

namespace {
// Growth step during decode: at least 16 entries, at most ~1/16 of the head,
// so the slack held stays small while reallocation copies stay amortized.
int GrowStep(int n) { return std::max(16, n / 16); }
}

size_t HeadStore::row_bytes() const { return kernels::RowBytesPadded(type_, d_); }

void HeadStore::Reserve(int n) {
  if (n <= cap_) return;
  cap_ = n;
  k_.resize(row_bytes() * cap_);
  v_.resize(row_bytes() * cap_);
  pos_.reserve(cap_);
  logw_.reserve(cap_);
}

void HeadStore::Grow(int need) {
  if (need <= cap_) return;
  const int step = GrowStep(n_);
  int cap = (need + step - 1) / step * step;
  std::vector<uint8_t> k(row_bytes() * cap), v(row_bytes() * cap);
  std::copy(k_.begin(), k_.begin() + row_bytes() * n_, k.begin());
  std::copy(v_.begin(), v_.begin() + row_bytes() * n_, v.begin());
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

void HeadStore::Append(const float* k, const float* v, int32_t pos, float logw) {
  Grow(n_ + 1);
  kernels::QuantizeRow(type_, k, k_.data() + row_bytes() * n_, d_);
  kernels::QuantizeRow(type_, v, v_.data() + row_bytes() * n_, d_);
  pos_.push_back(pos);
  logw_.push_back(logw);
  ++n_;
}

void HeadStore::Retain(const std::vector<int>& keep) {
  const size_t rb = row_bytes();
  int w = 0;
  for (int i : keep) {
    if (i != w) {
      std::memmove(k_.data() + rb * w, k_.data() + rb * i, rb);
      std::memmove(v_.data() + rb * w, v_.data() + rb * i, rb);
      pos_[w] = pos_[i];
      logw_[w] = logw_[i];
    }
    ++w;
  }
  n_ = w;
  pos_.resize(n_);
  logw_.resize(n_);
  ShrinkToFit();
}

void HeadStore::ShrinkToFit() {
  if (cap_ == n_) return;
  const size_t rb = row_bytes();
  std::vector<uint8_t> k(k_.begin(), k_.begin() + rb * n_), v(v_.begin(), v_.begin() + rb * n_);
  k_.swap(k);
  v_.swap(v);
  pos_.shrink_to_fit();
  logw_.shrink_to_fit();
  cap_ = n_;
}

void HeadStore::Clear() {
  n_ = cap_ = 0;
  std::vector<uint8_t>().swap(k_);
  std::vector<uint8_t>().swap(v_);
  std::vector<int32_t>().swap(pos_);
  std::vector<float>().swap(logw_);
}

void HeadStore::ReadKey(int i, float* out) const { kernels::DequantRow(type_, key_row(i), out, d_); }
void HeadStore::ReadValue(int i, float* out) const { kernels::DequantRow(type_, value_row(i), out, d_); }
void HeadStore::WriteKey(int i, const float* k) { kernels::QuantizeRow(type_, k, k_.data() + row_bytes() * i, d_); }
void HeadStore::WriteValue(int i, const float* v) {
  kernels::QuantizeRow(type_, v, v_.data() + row_bytes() * i, d_);
}

kernels::KvView HeadStore::View() const {
  return {type_, k_.data(), v_.data(), row_bytes(), logw_.data(), n_, d_};
}

size_t HeadStore::BytesHeld() const {
  return k_.capacity() + v_.capacity() + pos_.capacity() * sizeof(int32_t) + logw_.capacity() * sizeof(float);
}

KvCache::KvCache(int n_layer, int n_head_kv, int head_dim, GgmlType type)
    : n_layer_(n_layer), n_head_kv_(n_head_kv), head_dim_(head_dim), type_(type) {
  heads_.assign(static_cast<size_t>(n_layer) * n_head_kv, HeadStore(head_dim, type));
}

void KvCache::Clear() {
  for (auto& h : heads_) h.Clear();
  n_logical_ = 0;
}

size_t KvCache::BytesHeld() const {
  size_t s = 0;
  for (const auto& h : heads_) s += h.BytesHeld();
  return s;
}

size_t KvCache::BytesFull() const {
  size_t per_entry = 2 * sizeof(float) * head_dim_ + sizeof(int32_t) + sizeof(float);
  return per_entry * static_cast<size_t>(n_logical_) * heads_.size();
}

size_t KvCache::EntriesHeld() const {
  size_t s = 0;
  for (const auto& h : heads_) s += h.size();
  return s;
}

}  // namespace kvtrim::kv
