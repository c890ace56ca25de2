#include "kvtrim/engine.h"

#include "engine/engine_impl.h"

#include <filesystem>
#include <thread>

#include "io/gguf.h"
#include "io/tokenizer.h"
#include "kernels/matmul.h"
#include "kernels/thread_pool.h"
#include "kv/profile.h"
#include "model/config.h"
#include "model/transformer.h"
#include "model/weights.h"

namespace kvtrim {

Expected<std::unique_ptr<Engine>> Engine::Load(const EngineOptions& opts) {
  if (opts.threads < 0) return MakeError("threads must be >= 0");
  std::unique_ptr<Engine> e(new Engine());
  auto f = io::GgufFile::Open(opts.model_path);
  if (!f.ok()) return f.error();
  e->impl_->file_ = std::move(f.value());
  auto c = model::ReadConfig(*e->impl_->file_);
  if (!c.ok()) return MakeError("'" + opts.model_path + "': " + c.error().message);
  KVTRIM_RETURN_IF_ERROR(model::ApplyRopeOverrides(opts.rope, &c.value()));
  if (opts.ctx < 0) return MakeError("context length " + std::to_string(opts.ctx) + " must be >= 0");
  if (opts.ctx > 0) c.value().ctx = opts.ctx;  // YaRN's original context stays the trained one
  e->impl_->config_ = std::make_unique<model::ModelConfig>(c.value());
  auto w = model::LoadWeights(*e->impl_->file_, *e->impl_->config_);
  if (!w.ok()) return MakeError("'" + opts.model_path + "': " + w.error().message);
  e->impl_->weights_ = std::make_unique<model::Weights>(std::move(w.value()));
  auto t = io::Tokenizer::FromGguf(*e->impl_->file_);
  if (!t.ok()) return MakeError("'" + opts.model_path + "': " + t.error().message);
  if (t->vocab_size() != e->impl_->config_->vocab) {
    return MakeError("'" + opts.model_path + "': tokenizer has " + std::to_string(t->vocab_size()) +
                     " tokens but token_embd has " + std::to_string(e->impl_->config_->vocab) + " rows");
  }
  e->impl_->tokenizer_ = std::make_unique<io::Tokenizer>(std::move(t.value()));
  e->impl_->transformer_ = std::make_unique<model::Transformer>(*e->impl_->config_, *e->impl_->weights_);
  int threads = opts.threads > 0 ? opts.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  e->impl_->pool_ = std::make_unique<kernels::ThreadPool>(threads);
  e->impl_->id = ModelId{std::filesystem::path(opts.model_path).filename().string(), e->impl_->file_->file_size(),
                         kv::ModelMetadataHash(*e->impl_->file_)};
  return e;
}

Engine::Engine() : impl_(std::make_unique<Impl>()) {}
Engine::~Engine() = default;

const ModelId& Engine::model_id() const { return impl_->id; }

int Engine::threads() const { return impl_->pool_->size(); }

int Engine::context_length() const { return impl_->config_->ctx; }
int Engine::trained_context_length() const { return impl_->config_->trained_ctx; }
bool Engine::rope_scaled() const { return impl_->config_->rope_scaling != "none"; }

}  // namespace kvtrim
