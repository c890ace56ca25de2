// Tiny Llama-3- and Qwen2-shaped GGUF models for tests, written with
// io/gguf_writer.h (the library's writer) from seeded random F32 weights and the stories260K
// SentencePiece vocabulary (optionally padded with synthetic pieces up to a
// large vocabulary), with the weights kept for an independent reference.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "io/gguf_writer.h"
#include "io/splitmix.h"
#include "test_util.h"

namespace kvtrim::test {

struct TinySpec {
  std::string arch = "llama";
  int dim = 64, n_layer = 2, n_head = 4, n_kv = 2, ffn = 96, ctx = 256;
  int rope_dims = 12;          // written as {arch}.rope.dimension_count (< head_dim 16)
  float base = 500000.f;
  std::string scaling_type;    // "" = key absent
  double factor = 0;           // 0 = key absent
  int orig_ctx = 0;            // 0 = key absent
  std::vector<float> freq_factors;  // rope_freqs.weight, empty = absent
  bool tied = false;
  int vocab = 0;               // 0: the 512 stories pieces; more: padded with "<pN>" pieces
  // The vocabulary's source (relative to ../shared): a model or a
  // vocabulary-only GGUF (e.g. vocab/ggml-vocab-gpt-2.gguf, byte-level BPE).
  std::string vocab_file = "models/stories260K.gguf";
  std::vector<std::string> control_tokens;  // appended as control tokens (e.g. <|im_start|>)
  int file_type = -1;          // general.file_type, -1 = absent
  uint64_t seed = 1;
  std::set<std::string> drop;  // metadata keys or tensor names to leave out
  std::map<std::string, std::pair<uint32_t, std::string>> raw;  // metadata to add/replace: key -> (type, payload)
  std::map<std::string, std::vector<uint64_t>> shapes;          // tensor shapes to override
  bool qkv_bias() const { return arch == "qwen2"; }
  int head_dim() const { return dim / n_head; }
};

struct TinyModel {
  std::string bytes;
  std::map<std::string, std::vector<float>> w;  // every tensor as written
  int vocab = 0;
};

inline double SplitMixUniform(uint64_t* s) {  // in [-1, 1)
  return static_cast<double>(io::SplitMix64(*s) >> 11) * 0x1.0p-52 - 1.0;
}

inline TinyModel MakeTinyModel(const TinySpec& s) {
  using W = io::GgufWriter;
  TinyModel m;
  std::vector<std::pair<std::string, std::pair<uint32_t, std::string>>> kv;
  const std::string a = s.arch + ".";
  auto u32 = [](int v) { return std::pair<uint32_t, std::string>{4, W::Pod<uint32_t>(static_cast<uint32_t>(v))}; };
  auto f32 = [](double v) { return std::pair<uint32_t, std::string>{6, W::Pod<float>(static_cast<float>(v))}; };
  auto str = [](const std::string& v) { return std::pair<uint32_t, std::string>{8, W::Str(v)}; };
  kv.push_back({"general.architecture", str(s.arch)});
  kv.push_back({"general.name", str("tiny-" + s.arch)});
  if (s.file_type >= 0) kv.push_back({"general.file_type", u32(s.file_type)});
  kv.push_back({a + "context_length", u32(s.ctx)});
  kv.push_back({a + "embedding_length", u32(s.dim)});
  kv.push_back({a + "block_count", u32(s.n_layer)});
  kv.push_back({a + "feed_forward_length", u32(s.ffn)});
  kv.push_back({a + "attention.head_count", u32(s.n_head)});
  kv.push_back({a + "attention.head_count_kv", u32(s.n_kv)});
  kv.push_back({a + "attention.layer_norm_rms_epsilon", f32(1e-5)});
  kv.push_back({a + "rope.dimension_count", u32(s.rope_dims)});
  kv.push_back({a + "rope.freq_base", f32(s.base)});
  if (!s.scaling_type.empty()) kv.push_back({a + "rope.scaling.type", str(s.scaling_type)});
  if (s.factor != 0) kv.push_back({a + "rope.scaling.factor", f32(s.factor)});
  if (s.orig_ctx) kv.push_back({a + "rope.scaling.original_context_length", u32(s.orig_ctx)});
  // The vocabulary (stories260K's by default), padded with synthetic normal
  // pieces up to s.vocab, then the control tokens.
  auto voc = io::GgufFile::Open(SharedPath(s.vocab_file));
  int n_tokens = 0;
  for (const auto& [k, v] : voc.value()->metadata()) {
    if (k.rfind("tokenizer.", 0) != 0) continue;
    io::GgufValue val = v;
    const bool per_token = k == "tokenizer.ggml.tokens" || k == "tokenizer.ggml.scores" ||
                           k == "tokenizer.ggml.token_type";
    if (per_token && val.type == io::GgufValueType::ARRAY) {
      auto& arr = std::get<io::GgufArray>(val.v);
      const int n0 = static_cast<int>(arr.size());
      const int n_pad = std::max(n0, s.vocab), n_all = n_pad + static_cast<int>(s.control_tokens.size());
      for (int i = n0; i < n_all; ++i) {
        io::GgufValue e;
        e.type = val.elem_type;
        const bool control = i >= n_pad;
        if (k == "tokenizer.ggml.tokens")
          e.v = control ? s.control_tokens[static_cast<size_t>(i - n_pad)] : "<p" + std::to_string(i) + ">";
        else if (k == "tokenizer.ggml.scores") e.v = -1e4 - i * 1.0;
        else e.v = static_cast<int64_t>(control ? 3 : 1);
        arr.push_back(e);
      }
      if (k == "tokenizer.ggml.tokens") n_tokens = n_all;
    }
    kv.push_back({k, {static_cast<uint32_t>(val.type), W::Encode(val)}});
  }
  m.vocab = n_tokens;
  for (const auto& [k, v] : s.raw) {
    bool found = false;
    for (auto& e : kv)
      if (e.first == k) e.second = v, found = true;
    if (!found) kv.push_back({k, v});
  }
  W wr;
  for (const auto& [k, v] : kv)
    if (!s.drop.count(k)) wr.AddRaw(k, v.first, v.second);

  uint64_t rng = s.seed;
  auto tensor = [&](const std::string& name, std::vector<uint64_t> shape, double scale, double offset) {
    size_t n = 1;
    for (uint64_t d : shape) n *= d;
    std::vector<float>& w = m.w[name];
    w.resize(n);
    for (float& x : w) x = static_cast<float>(offset + scale * SplitMixUniform(&rng));
    if (s.drop.count(name)) return;
    if (auto it = s.shapes.find(name); it != s.shapes.end()) shape = it->second;
    size_t n_out = 1;
    for (uint64_t d : shape) n_out *= d;
    std::string data(n_out * 4, '\0');
    std::memcpy(data.data(), w.data(), std::min(n, n_out) * 4);
    wr.AddTensor(name, shape, GgmlType::F32, data);
  };
  const uint64_t D = s.dim, F = s.ffn, V = m.vocab, hd = s.head_dim(), Q = s.n_head * hd, K = s.n_kv * hd;
  const double ws = 1.0 / std::sqrt(static_cast<double>(s.dim));
  tensor("token_embd.weight", {D, V}, 1.0, 0);
  tensor("output_norm.weight", {D}, 0.1, 1.0);
  if (!s.tied) tensor("output.weight", {D, V}, ws, 0);
  if (!s.freq_factors.empty()) {
    m.w["rope_freqs.weight"] = s.freq_factors;
    std::vector<uint64_t> shape = {s.freq_factors.size()};
    if (auto it = s.shapes.find("rope_freqs.weight"); it != s.shapes.end()) shape = it->second;
    std::string data(s.freq_factors.size() * 4, '\0');
    std::memcpy(data.data(), s.freq_factors.data(), data.size());
    if (!s.drop.count("rope_freqs.weight")) wr.AddTensor("rope_freqs.weight", shape, GgmlType::F32, data);
  }
  for (int l = 0; l < s.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    tensor(p + "attn_norm.weight", {D}, 0.1, 1.0);
    tensor(p + "ffn_norm.weight", {D}, 0.1, 1.0);
    tensor(p + "attn_q.weight", {D, Q}, ws, 0);
    tensor(p + "attn_k.weight", {D, K}, ws, 0);
    tensor(p + "attn_v.weight", {D, K}, ws, 0);
    tensor(p + "attn_output.weight", {Q, D}, ws, 0);
    tensor(p + "ffn_gate.weight", {D, F}, ws, 0);
    tensor(p + "ffn_up.weight", {D, F}, ws, 0);
    tensor(p + "ffn_down.weight", {F, D}, 1.0 / std::sqrt(static_cast<double>(F)), 0);
    if (s.qkv_bias()) {
      tensor(p + "attn_q.bias", {Q}, 0.2, 0);
      tensor(p + "attn_k.bias", {K}, 0.2, 0);
      tensor(p + "attn_v.bias", {K}, 0.2, 0);
    }
  }
  m.bytes = wr.Bytes();
  return m;
}

}  // namespace kvtrim::test
