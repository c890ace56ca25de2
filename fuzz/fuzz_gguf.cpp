// libFuzzer target: an untrusted GGUF image through everything loading a model
// does (Engine::Load's steps: parse, config, weights, tokenizer, vocabulary
// check), then the first forward pass (a batched prefill of 2 tokens and one
// decode step) when the model is small. Any input must give a value or an
// error, never a crash or a sanitizer report.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "io/tokenizer.h"
#include "kernels/thread_pool.h"
#include "kv/cache.h"
#include "model/config.h"
#include "model/transformer.h"
#include "model/weights.h"

namespace {

// Forward passes only on models up to this many weight bytes (keeps the
// executions per second high; parsing and loading have no such cap).
constexpr size_t kMaxForwardBytes = size_t{8} << 20;

void Run(const uint8_t* data, size_t size) {
  using namespace kvtrim;
  auto f = io::GgufFile::FromBytes(std::string(reinterpret_cast<const char*>(data), size));
  if (!f.ok()) return;
  for (const auto& [k, v] : f.value()->metadata()) (void)v.ToString();  // what `kvtrim inspect` prints
  auto c = model::ReadConfig(*f.value());
  if (!c.ok()) return;
  auto w = model::LoadWeights(*f.value(), c.value());
  if (!w.ok()) return;
  auto t = io::Tokenizer::FromGguf(*f.value());
  if (!t.ok() || t->vocab_size() != c->vocab) return;
  if (w->total_bytes > kMaxForwardBytes) return;
  std::vector<int> ids = t->Encode("Hi there", true);
  if (ids.size() < 2) ids.push_back(t->eos());
  ids.resize(2);
  static kernels::ThreadPool pool(1);
  model::Transformer tr(c.value(), w.value());
  kv::KvCache cache(c->n_layer, c->n_head_kv, c->head_dim);
  std::vector<float> logits;
  if (!tr.Forward(pool, cache, ids.data(), 2, false, &logits).ok()) return;
  const int next = ids[1];
  (void)tr.Forward(pool, cache, &next, 1, false, &logits);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Run(data, size);
  return 0;
}
