// Models at the published shapes of real ones, with seeded noise for weights
// and a synthetic vocabulary of the real size (`kvtrim make-model`,
// docs/shape-models.md). The weights are noise: the files are for speed and
// memory measurements only, never for quality.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/ggml_types.h"
#include "io/gguf_writer.h"
#include "kvtrim/shape_model.h"
#include "kvtrim/status.h"

namespace kvtrim::model {

// One published configuration (the Hugging Face config.json values).
struct ModelShape {
  const char* name;   // the --shape name, e.g. "smollm2-135m"
  const char* hf_id;  // where the configuration comes from
  const char* arch;   // GGUF architecture: "llama" or "qwen2"
  int dim, n_layer, n_head, n_kv, head_dim, ffn, vocab, ctx;
  float rope_base, rms_eps;
  bool qkv_bias;
  // Llama 3 RoPE scaling (factor 0: none), written as llama.cpp's converter
  // does: a rope_freqs.weight tensor of head_dim/2 factors.
  float rope_factor, low_freq_factor, high_freq_factor;
  int rope_orig_ctx;
};

const std::vector<ModelShape>& ModelShapes();
const ModelShape* FindModelShape(const std::string& name);
using kvtrim::ModelShapeNames;  // kvtrim/shape_model.h

// The --type names: f16, q8_0, q4_0 (matrices and token_embd; norms,
// biases and rope_freqs stay F32, as llama.cpp's converters keep them).
Expected<GgmlType> ParseShapeModelType(const std::string& name);
// general.file_type (llama.cpp's LLAMA_FTYPE) of a --type.
int ShapeModelFileType(GgmlType t);

// Llama 3's per-frequency RoPE factors (llama.cpp's convert_hf_to_gguf.py).
std::vector<float> Llama3RopeFactors(const ModelShape& s);

using kvtrim::ShapeModelOptions;  // kvtrim/shape_model.h

// The text written as general.description (and shown by --help).
std::string ShapeModelDescription();
// The whole file declared: metadata and tensors, whose data the writer
// produces as it streams the file (WriteFile) or builds it in memory.
Expected<io::GgufWriter> BuildShapeModel(const ShapeModelOptions& o);

}  // namespace kvtrim::model
