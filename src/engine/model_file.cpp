// A GGUF file without its weights (include/kvtrim/model_file.h).
#include "kvtrim/model_file.h"

#include <chrono>
#include <cstdio>
#include <ctime>

#include "io/gguf.h"
#include "io/tokenizer.h"
#include "model/config.h"

namespace kvtrim {
namespace {

// printf into a std::string.
template <class... A>
void Add(std::string* out, const char* fmt, A... a) {
  const int n = std::snprintf(nullptr, 0, fmt, a...);
  if (n <= 0) return;
  std::string s(static_cast<size_t>(n) + 1, '\0');
  std::snprintf(s.data(), s.size(), fmt, a...);
  s.pop_back();
  *out += s;
}

void AddConfig(std::string* out, const model::ModelConfig& m) {
  Add(out, "architecture: %s%s%s\n", m.arch.c_str(), m.name.empty() ? "" : "  name: ", m.name.c_str());
  Add(out, "  dim %d, layers %d, heads %d, kv heads %d (group %d), head dim %d, ffn %d\n", m.dim, m.n_layer, m.n_head,
      m.n_head_kv, m.group(), m.head_dim, m.ffn_dim);
  Add(out, "  vocab %d, context %d, rope %s base %g dims %d, rms eps %g, qkv bias %s, tied embeddings %s\n", m.vocab,
      m.ctx, m.rope_mode == kernels::RopeMode::kNormal ? "normal (adjacent pairs)" : "neox (halves)", m.rope_base,
      m.rope_dims, m.rms_eps, m.qkv_bias ? "yes" : "no", m.tied_embeddings ? "yes" : "no");
  Add(out, "  rope scaling %s (freq scale %g, original context %d), rope_freqs factors %s, file type %s\n",
      m.rope_scaling.c_str(), m.rope_freq_scale, m.rope_orig_ctx, m.rope_freq_factors ? "yes" : "no",
      model::FileTypeName(m.file_type).c_str());
}

void AddTensors(std::string* out, const io::GgufFile& g) {
  Add(out, "tensors:\n  %-32s %-6s %-18s %12s\n", "name", "type", "shape", "bytes");
  uint64_t total = 0;
  for (const auto& ti : g.tensors()) {
    std::string shape;
    for (size_t i = 0; i < ti.shape.size(); ++i) shape += (i ? " x " : "") + std::to_string(ti.shape[i]);
    Add(out, "  %-32s %-6s %-18s %12llu\n", ti.name.c_str(), TypeName(ti.type).c_str(), shape.c_str(),
        static_cast<unsigned long long>(ti.n_bytes));
    total += ti.n_bytes;
  }
  Add(out, "  total tensor bytes: %llu\n", static_cast<unsigned long long>(total));
}

}  // namespace

Expected<std::string> DescribeModelFile(const std::string& path, bool metadata) {
  auto f = io::GgufFile::Open(path);
  if (!f.ok()) return f.error();
  const io::GgufFile& g = *f.value();
  std::string out;
  Add(&out, "file: %s (%zu bytes, GGUF v%u, alignment %llu, %zu metadata keys, %zu tensors)\n", path.c_str(),
      g.file_size(), g.version(), static_cast<unsigned long long>(g.alignment()), g.metadata().size(),
      g.tensors().size());
  auto c = model::ReadConfig(g);
  if (!c.ok()) return c.error();
  AddConfig(&out, c.value());
  auto t = io::Tokenizer::FromGguf(g);
  if (t.ok()) Add(&out, "tokenizer: %s\n", t->Describe().c_str());
  else Add(&out, "tokenizer: unavailable (%s)\n", t.error().message.c_str());
  if (metadata) {
    out += "metadata:\n";
    for (const auto& [k, v] : g.metadata()) Add(&out, "  %-45s %s\n", k.c_str(), v.ToString().c_str());
  }
  AddTensors(&out, g);
  return out;
}

Expected<Tokenized> TokenizeFile(const std::string& path, const std::string& text, bool bos, bool special) {
  using Clock = std::chrono::steady_clock;
  auto cpu_ms = [](std::clock_t a, std::clock_t b) { return (b - a) * 1e3 / CLOCKS_PER_SEC; };
  const auto t0 = Clock::now();
  const std::clock_t c0 = std::clock();
  auto f = io::GgufFile::Open(path);
  if (!f.ok()) return f.error();
  const auto t_open = Clock::now();
  auto tok = io::Tokenizer::FromGguf(*f.value());
  if (!tok.ok()) return MakeError(path + ": " + tok.error().message);
  const auto t1 = Clock::now();
  const std::clock_t c1 = std::clock();
  Tokenized r;
  r.ids = tok->Encode(text, bos, special);
  const auto t2 = Clock::now();
  const std::clock_t c2 = std::clock();
  r.tokenizer = tok->Describe();
  r.open_ms = std::chrono::duration<double, std::milli>(t_open - t0).count();
  r.build_ms = std::chrono::duration<double, std::milli>(t1 - t_open).count();
  r.load_cpu_ms = cpu_ms(c0, c1);
  r.encode_s = std::chrono::duration<double>(t2 - t1).count();
  r.encode_cpu_ms = cpu_ms(c1, c2);
  r.pieces.reserve(r.ids.size());
  for (size_t i = 0; i < r.ids.size(); ++i) {
    const bool control = tok->type(r.ids[i]) == io::TokenType::kControl;
    r.pieces.push_back(control ? tok->piece_text(r.ids[i]) : tok->Piece(i ? r.ids[i - 1] : -1, r.ids[i]));
  }
  return r;
}

}  // namespace kvtrim
