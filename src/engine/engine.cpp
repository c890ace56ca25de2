#include "kvtrim/engine.h"

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
  e->file_ = std::move(f.value());
  auto c = model::ReadConfig(*e->file_);
  if (!c.ok()) return MakeError("'" + opts.model_path + "': " + c.error().message);
  KVTRIM_RETURN_IF_ERROR(model::ApplyRopeOverrides(opts.rope, &c.value()));
  if (opts.ctx < 0) return MakeError("context length " + std::to_string(opts.ctx) + " must be >= 0");
  if (opts.ctx > 0) c.value().ctx = opts.ctx;  // YaRN's original context stays the trained one
  e->config_ = std::make_unique<model::ModelConfig>(c.value());
  auto w = model::LoadWeights(*e->file_, *e->config_);
  if (!w.ok()) return MakeError("'" + opts.model_path + "': " + w.error().message);
  e->weights_ = std::make_unique<model::Weights>(std::move(w.value()));
  auto t = io::Tokenizer::FromGguf(*e->file_);
  if (!t.ok()) return MakeError("'" + opts.model_path + "': " + t.error().message);
  if (t->vocab_size() != e->config_->vocab) {
    return MakeError("'" + opts.model_path + "': tokenizer has " + std::to_string(t->vocab_size()) +
                     " tokens but token_embd has " + std::to_string(e->config_->vocab) + " rows");
  }
  e->tokenizer_ = std::make_unique<io::Tokenizer>(std::move(t.value()));
  e->transformer_ = std::make_unique<model::Transformer>(*e->config_, *e->weights_);
  int threads = opts.threads > 0 ? opts.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  e->pool_ = std::make_unique<kernels::ThreadPool>(threads);
  e->id_ = std::make_unique<kv::ModelId>(kv::ModelId{std::filesystem::path(opts.model_path).filename().string(),
                                                     e->file_->file_size(), kv::ModelMetadataHash(*e->file_)});
  return e;
}

Engine::~Engine() = default;

int Engine::threads() const { return pool_->size(); }

int Engine::context_length() const { return config_->ctx; }
int Engine::trained_context_length() const { return config_->trained_ctx; }
bool Engine::rope_scaled() const { return config_->rope_scaling != "none"; }

}  // namespace kvtrim
