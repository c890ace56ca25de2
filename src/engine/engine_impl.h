// The inside of Engine and Session (include/kvtrim/engine.h keeps them
// opaque): the model file, its configuration, weights, tokenizer and forward
// pass, the threads; a session's cache, compressor and the pool it runs on.
// Library code reaches them as engine.impl().config(), session.impl().cache().
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "io/gguf.h"
#include "io/tokenizer.h"
#include "kernels/thread_pool.h"
#include "kv/cache.h"
#include "kv/compressor.h"
#include "kvtrim/engine.h"
#include "kvtrim/profile.h"
#include "model/config.h"
#include "model/transformer.h"
#include "model/weights.h"

namespace kvtrim {

struct Engine::Impl {
  const model::ModelConfig& config() const { return *config_; }
  const model::Weights& weights() const { return *weights_; }
  const io::Tokenizer& tokenizer() const { return *tokenizer_; }
  const io::GgufFile& file() const { return *file_; }
  const model::Transformer& transformer() const { return *transformer_; }
  kernels::ThreadPool& pool() const { return *pool_; }

  ModelId id;
  mutable std::mutex profile_mu;
  mutable std::map<std::string, std::shared_ptr<const ModelProfile>> profiles;
  std::unique_ptr<io::GgufFile> file_;
  std::unique_ptr<model::ModelConfig> config_;
  std::unique_ptr<model::Weights> weights_;
  std::unique_ptr<io::Tokenizer> tokenizer_;
  std::unique_ptr<model::Transformer> transformer_;
  std::unique_ptr<kernels::ThreadPool> pool_;
};

struct Session::Impl {
  kv::KvCache& cache() { return *cache_; }
  const kv::KvCache& cache() const { return *cache_; }
  kv::Compressor& compressor() { return *compressor_; }
  const kv::Compressor& compressor() const { return *compressor_; }
  // Forward passes and compression run on `pool` (nullptr: the engine's).
  // A pool serves one caller at a time, so sessions running concurrently on
  // one Engine need a pool each (the server gives each decoding slot its
  // own). A fork inherits it.
  void UsePool(kernels::ThreadPool* pool) { pool_ = pool; }
  kernels::ThreadPool& pool(const Engine& e) const { return pool_ ? *pool_ : e.impl().pool(); }

  std::unique_ptr<kv::KvCache> cache_;
  std::unique_ptr<kv::Compressor> compressor_;
  kernels::ThreadPool* pool_ = nullptr;
};

}  // namespace kvtrim
