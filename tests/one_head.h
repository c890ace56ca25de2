// A compressor over one KV head of dimension 2 (one layer, G = 1), fed by
// hand: entries appended at given positions and each query's probabilities
// over the entries it sees, as the forward pass would hand them over.
#pragma once
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "kv/cache.h"
#include "kv/compressor.h"

namespace kvtrim::test {

struct OneHead {
  kv::KvCache cache{1, 1, 2};
  std::unique_ptr<kv::Compressor> comp;
  explicit OneHead(const KvOptions& o) {
    auto c = kv::Compressor::Create(o, 1, 1, 1, 2);
    EXPECT_TRUE(c.ok()) << c.error().message;
    if (c.ok()) comp = std::move(c.value());
  }
  // Appends entries at positions [p0, p0 + rows.size()) and feeds query t
  // (position p0 + t) the probabilities rows[t] over the entries it sees.
  void Chunk(int p0, const std::vector<std::vector<float>>& rows) {
    for (size_t t = 0; t < rows.size(); ++t) {
      const float k[2] = {0.1f * (p0 + t), 1.f}, v[2] = {1.f, 0.f};
      cache.head(0, 0).Append(k, v, p0 + static_cast<int>(t), 0.f);
    }
    cache.AdvanceLogical(static_cast<int>(rows.size()));
    comp->stats().OnBatch(p0, static_cast<int>(rows.size()));
    for (size_t t = 0; t < rows.size(); ++t)
      comp->stats().OnProbs(0, 0, static_cast<int>(t), 0, rows[t].data(), static_cast<int>(rows[t].size()));
  }
  // The positions of the entries held, in order.
  std::vector<int> Positions() const {
    std::vector<int> p;
    for (int i = 0; i < cache.head(0, 0).size(); ++i) p.push_back(static_cast<int>(cache.head(0, 0).pos(i)));
    return p;
  }
};

}  // namespace kvtrim::test
