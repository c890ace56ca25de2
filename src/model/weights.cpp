#include "model/weights.h"

#include <cstdlib>

#include "kernels/quant.h"

namespace kvtrim::model {
namespace {

std::string ShapeStr(const std::vector<uint64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

class Loader {
 public:
  explicit Loader(const io::GgufFile& f) : f_(f) {}
  size_t bytes = 0;

  Expected<const io::GgufTensorInfo*> Get(const std::string& name, std::vector<uint64_t> shape) {
    const io::GgufTensorInfo* t = f_.FindTensor(name);
    if (!t) return MakeError("missing tensor '" + name + "'");
    if (t->shape != shape) {
      return MakeError("shape mismatch for tensor '" + name + "': file has " + ShapeStr(t->shape) +
                       ", model needs " + ShapeStr(shape));
    }
    bytes += t->n_bytes;
    return t;
  }
  Status Matrix(const std::string& name, int rows, int cols, kernels::WeightView* out) {
    auto t = Get(name, {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows)});
    if (!t.ok()) return t.error();
    *out = {t.value()->type, t.value()->data, rows, cols};
    return {};
  }
  Status Vector(const std::string& name, int n, std::vector<float>* out) {
    auto t = Get(name, {static_cast<uint64_t>(n)});
    if (!t.ok()) return t.error();
    out->resize(n);
    kernels::DequantRow(t.value()->type, t.value()->data, out->data(), n);
    return {};
  }

 private:
  const io::GgufFile& f_;
};

// Repacks every Q8_0/Q4_0 matrix the products use (the output included, for
// all-logits batches; not the embedding table, read one row at a time).
// KVTRIM_REPACK=0 in the environment skips it (less memory; prefill then
// dequantizes row blocks for Eigen's GEMM as before).
// The stored rows of a repacked matrix are then read by no product (every
// kernel path runs on the repack): their pages are released from resident
// memory (the embedding table's, shared by a tied output matrix, are kept for
// the row lookups). Anything that still reads them faults them back in from
// the file, unchanged.
void Repack(const io::GgufFile& f, Weights* w) {
  if (const char* e = std::getenv("KVTRIM_REPACK"); e && std::string(e) == "0") return;
  std::vector<kernels::WeightView*> views{&w->output};
  for (LayerWeights& L : w->layers)
    for (kernels::WeightView* v : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) views.push_back(v);
  // one arena: the small matrices' repacks share huge pages (kernels/huge_pages.h)
  const auto arena = std::make_shared<kernels::StreamedArena>();
  for (kernels::WeightView* v : views) {
    if (!kernels::PackSupports(*v)) continue;
    auto p = std::make_shared<const kernels::PackedWeights>(kernels::PackWeights(*v, arena));
    w->packed_bytes += p->bytes();
    v->packed = p.get();
    w->packed.push_back(std::move(p));
    if (v->data != w->tok_embd.data) w->released_bytes += f.ReleasePages(v->data, v->bytes());
  }
}

}  // namespace

Expected<Weights> LoadWeights(const io::GgufFile& f, const ModelConfig& c) {
  Weights w;
  Loader ld(f);
  const int hd = c.head_dim, q_dim = c.n_head * hd, kv_dim = c.n_head_kv * hd;
  KVTRIM_RETURN_IF_ERROR(ld.Matrix("token_embd.weight", c.vocab, c.dim, &w.tok_embd));
  if (c.tied_embeddings) w.output = w.tok_embd;
  else KVTRIM_RETURN_IF_ERROR(ld.Matrix("output.weight", c.vocab, c.dim, &w.output));
  KVTRIM_RETURN_IF_ERROR(ld.Vector("output_norm.weight", c.dim, &w.output_norm));
  if (c.rope_freq_factors) {
    KVTRIM_RETURN_IF_ERROR(ld.Vector("rope_freqs.weight", c.rope_dims / 2, &w.rope_freqs));
    for (size_t i = 0; i < w.rope_freqs.size(); ++i) {
      const float v = w.rope_freqs[i];
      if (!(v > 0 && v < 1e30f)) {
        return MakeError("tensor 'rope_freqs.weight' element " + std::to_string(i) + " = " + std::to_string(v) +
                         " is not a positive finite factor");
      }
    }
  }
  w.layers.resize(c.n_layer);
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LayerWeights& L = w.layers[l];
    KVTRIM_RETURN_IF_ERROR(ld.Vector(p + "attn_norm.weight", c.dim, &L.attn_norm));
    KVTRIM_RETURN_IF_ERROR(ld.Vector(p + "ffn_norm.weight", c.dim, &L.ffn_norm));
    KVTRIM_RETURN_IF_ERROR(ld.Matrix(p + "attn_q.weight", q_dim, c.dim, &L.wq));
    KVTRIM_RETURN_IF_ERROR(ld.Matrix(p + "attn_k.weight", kv_dim, c.dim, &L.wk));
    KVTRIM_RETURN_IF_ERROR(ld.Matrix(p + "attn_v.weight", kv_dim, c.dim, &L.wv));
    KVTRIM_RETURN_IF_ERROR(ld.Matrix(p + "attn_output.weight", c.dim, q_dim, &L.wo));
    KVTRIM_RETURN_IF_ERROR(ld.Matrix(p + "ffn_gate.weight", c.ffn_dim, c.dim, &L.w_gate));
    KVTRIM_RETURN_IF_ERROR(ld.Matrix(p + "ffn_up.weight", c.ffn_dim, c.dim, &L.w_up));
    KVTRIM_RETURN_IF_ERROR(ld.Matrix(p + "ffn_down.weight", c.dim, c.ffn_dim, &L.w_down));
    if (c.qkv_bias) {
      KVTRIM_RETURN_IF_ERROR(ld.Vector(p + "attn_q.bias", q_dim, &L.bq));
      KVTRIM_RETURN_IF_ERROR(ld.Vector(p + "attn_k.bias", kv_dim, &L.bk));
      KVTRIM_RETURN_IF_ERROR(ld.Vector(p + "attn_v.bias", kv_dim, &L.bv));
    }
  }
  w.total_bytes = ld.bytes;
  Repack(f, &w);
  return w;
}

}  // namespace kvtrim::model
