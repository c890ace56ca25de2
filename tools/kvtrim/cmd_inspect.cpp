// `kvtrim inspect`: architecture, hyperparameters, tokenizer, tensor table.
#include <cstdio>

#include "commands.h"
#include "io/gguf.h"
#include "io/tokenizer.h"
#include "kvtrim/engine.h"
#include "model/config.h"

namespace kvtrim::cli {

Command AddInspect(CLI::App& app) {
  auto model = std::make_shared<std::string>(DefaultModelPath());
  auto show_meta = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand("inspect", "Show a GGUF model's architecture, tokenizer and tensors");
  sub->add_option("model", *model, "GGUF model file")->capture_default_str();
  sub->add_flag("--metadata", *show_meta, "Also list every metadata key");
  auto action = [model, show_meta]() -> int {
    auto f = io::GgufFile::Open(*model);
    if (!f.ok()) {
      std::fprintf(stderr, "kvtrim inspect: %s\n", f.error().message.c_str());
      return 1;
    }
    const io::GgufFile& g = *f.value();
    std::printf("file: %s (%zu bytes, GGUF v%u, alignment %llu, %zu metadata keys, %zu tensors)\n", model->c_str(),
                g.file_size(), g.version(), static_cast<unsigned long long>(g.alignment()), g.metadata().size(),
                g.tensors().size());
    auto c = model::ReadConfig(g);
    if (!c.ok()) {
      std::fprintf(stderr, "kvtrim inspect: %s\n", c.error().message.c_str());
      return 1;
    }
    const model::ModelConfig& m = c.value();
    std::printf("architecture: %s%s%s\n", m.arch.c_str(), m.name.empty() ? "" : "  name: ", m.name.c_str());
    std::printf("  dim %d, layers %d, heads %d, kv heads %d (group %d), head dim %d, ffn %d\n", m.dim, m.n_layer,
                m.n_head, m.n_head_kv, m.group(), m.head_dim, m.ffn_dim);
    std::printf("  vocab %d, context %d, rope %s base %g dims %d, rms eps %g, qkv bias %s, tied embeddings %s\n",
                m.vocab, m.ctx, m.rope_mode == kernels::RopeMode::kNormal ? "normal (adjacent pairs)" : "neox (halves)",
                m.rope_base, m.rope_dims, m.rms_eps, m.qkv_bias ? "yes" : "no", m.tied_embeddings ? "yes" : "no");
    std::printf("  rope scaling %s (freq scale %g, original context %d), rope_freqs factors %s, file type %s\n",
                m.rope_scaling.c_str(), m.rope_freq_scale, m.rope_orig_ctx, m.rope_freq_factors ? "yes" : "no",
                model::FileTypeName(m.file_type).c_str());
    auto t = io::Tokenizer::FromGguf(g);
    if (t.ok()) {
      std::printf("tokenizer: %s\n", t->Describe().c_str());
    } else {
      std::printf("tokenizer: unavailable (%s)\n", t.error().message.c_str());
    }
    if (*show_meta) {
      std::printf("metadata:\n");
      for (const auto& [k, v] : g.metadata()) std::printf("  %-45s %s\n", k.c_str(), v.ToString().c_str());
    }
    std::printf("tensors:\n  %-32s %-6s %-18s %12s\n", "name", "type", "shape", "bytes");
    uint64_t total = 0;
    for (const auto& ti : g.tensors()) {
      std::string shape;
      for (size_t i = 0; i < ti.shape.size(); ++i) shape += (i ? " x " : "") + std::to_string(ti.shape[i]);
      std::printf("  %-32s %-6s %-18s %12llu\n", ti.name.c_str(), TypeName(ti.type).c_str(), shape.c_str(),
                  static_cast<unsigned long long>(ti.n_bytes));
      total += ti.n_bytes;
    }
    std::printf("  total tensor bytes: %llu\n", static_cast<unsigned long long>(total));
    return 0;
  };
  return {sub, action};
}

}  // namespace kvtrim::cli
