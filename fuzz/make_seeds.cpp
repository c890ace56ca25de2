// Writes the seed corpora of the fuzz targets (scripts/fuzz.sh runs it):
//   gguf/       tiny models cut from the shared models (their metadata and
//               tokenizer, one layer, small dimensions, each tensor in its
//               original type, seeded weights) and synthetic files from the
//               test GGUF writer (every metadata type, nested arrays);
//   tokenizer/  a selector byte + text (prose, Unicode, special-token text);
//   plan/       seeded random bytes.
// Usage: kvtrim_fuzz_seeds OUT_DIR SHARED_DIR
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "io/gguf_writer.h"
#include "io/gguf.h"
#include "kernels/quant.h"

namespace fs = std::filesystem;
using kvtrim::GgmlType;
using kvtrim::io::GgufWriter;

namespace {

void Write(const fs::path& p, const std::string& bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << bytes;
}

// Seeded data for one tensor of `type` with rows of `row` elements.
std::string TensorData(GgmlType type, uint64_t row, uint64_t rows, std::mt19937& rng) {
  const kvtrim::TypeTraits* tt = kvtrim::GetTypeTraits(static_cast<uint32_t>(type));
  const size_t row_bytes = row / tt->block_elems * tt->block_bytes;
  std::string out(row_bytes * rows, '\0');
  std::normal_distribution<float> nd(0.f, 0.1f);
  std::vector<float> x(row);
  for (uint64_t r = 0; r < rows; ++r) {
    uint8_t* dst = reinterpret_cast<uint8_t*>(out.data()) + r * row_bytes;
    switch (type) {
      case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16: case GgmlType::Q8_0: case GgmlType::Q4_0:
        for (float& v : x) v = nd(rng);
        kvtrim::kernels::QuantizeRow(type, x.data(), dst, static_cast<int>(row));
        break;
      default:  // other block types: seeded bytes (scales may be any f16)
        for (size_t b = 0; b < row_bytes; ++b) dst[b] = static_cast<uint8_t>(rng());
    }
  }
  return out;
}

// A one-layer model with the metadata and tensor types of `src`.
std::string Shrink(const kvtrim::io::GgufFile& src) {
  auto arch = src.GetString("general.architecture");
  const std::string p = (arch.ok() ? arch.value() : "llama") + ".";
  uint64_t block = 1;  // the largest block of the file's tensor types: rows must hold whole blocks
  for (const auto& t : src.tensors()) block = std::max<uint64_t>(block, kvtrim::GetTypeTraits(static_cast<uint32_t>(t.type))->block_elems);
  const uint64_t D = std::max<uint64_t>(16, block), F = D, H = 2, HKV = 1, hd = D / H;
  GgufWriter w;
  for (const auto& [key, val] : src.metadata()) {
    if (key == p + "rope.dimension_count") continue;
    auto u32 = [&w, &key = key](uint64_t x) { w.AddRaw(key, 4, GgufWriter::U32(static_cast<uint32_t>(x))); };
    if (key == p + "embedding_length") u32(D);
    else if (key == p + "block_count") u32(1);
    else if (key == p + "feed_forward_length") u32(F);
    else if (key == p + "attention.head_count") u32(H);
    else if (key == p + "attention.head_count_kv") u32(HKV);
    else if (key == p + "context_length") u32(64);
    else w.AddValue(key, val);
  }
  std::mt19937 rng(1234);
  for (const auto& t : src.tensors()) {
    const std::string& n = t.name;
    if (n.rfind("blk.", 0) == 0 && n.rfind("blk.0.", 0) != 0) continue;
    const uint64_t V = t.shape.size() == 2 ? t.shape[1] : 0;
    std::vector<uint64_t> shape;
    if (n == "token_embd.weight" || n == "output.weight") shape = {D, V};
    else if (n.find("attn_q.weight") != std::string::npos) shape = {D, H * hd};
    else if (n.find("attn_k.weight") != std::string::npos || n.find("attn_v.weight") != std::string::npos) shape = {D, HKV * hd};
    else if (n.find("attn_output.weight") != std::string::npos) shape = {H * hd, D};
    else if (n.find("ffn_gate.weight") != std::string::npos || n.find("ffn_up.weight") != std::string::npos) shape = {D, F};
    else if (n.find("ffn_down.weight") != std::string::npos) shape = {F, D};
    else if (n.find("attn_q.bias") != std::string::npos) shape = {H * hd};
    else if (n.find("attn_k.bias") != std::string::npos || n.find("attn_v.bias") != std::string::npos) shape = {HKV * hd};
    else shape = {D};  // norms
    const uint64_t rows = shape.size() == 2 ? shape[1] : 1;
    w.AddTensor(n, shape, t.type, TensorData(t.type, shape[0], rows, rng));
  }
  return w.Bytes();
}

// Synthetic files: every metadata type, nested arrays, an odd alignment.
std::vector<std::string> Synthetic() {
  std::vector<std::string> out;
  GgufWriter a(64);
  a.AddRaw("general.alignment", 4, GgufWriter::U32(64));
  a.AddRaw("u8", 0, GgufWriter::Pod<uint8_t>(7));
  a.AddRaw("i8", 1, GgufWriter::Pod<int8_t>(-7));
  a.AddRaw("u16", 2, GgufWriter::Pod<uint16_t>(700));
  a.AddRaw("i16", 3, GgufWriter::Pod<int16_t>(-700));
  a.AddRaw("i32", 5, GgufWriter::Pod<int32_t>(-70000));
  a.AddRaw("f32", 6, GgufWriter::Pod<float>(0.5f));
  a.AddRaw("bool", 7, GgufWriter::Pod<uint8_t>(1));
  a.AddRaw("u64", 10, GgufWriter::Pod<uint64_t>(uint64_t{1} << 40));
  a.AddRaw("i64", 11, GgufWriter::Pod<int64_t>(-1));
  a.AddRaw("f64", 12, GgufWriter::Pod<double>(0.25));
  a.AddRaw("nested", 9, GgufWriter::U32(9) + GgufWriter::Pod<uint64_t>(2) + GgufWriter::U32(8) +
                            GgufWriter::Pod<uint64_t>(1) + GgufWriter::Str("x") + GgufWriter::U32(0) +
                            GgufWriter::Pod<uint64_t>(3) + "abc");
  a.AddTensor("t", {32, 2}, GgmlType::Q8_0, std::string(68, '\1'));
  out.push_back(a.Bytes());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s OUT_DIR SHARED_DIR\n", argv[0]);
    return 2;
  }
  const fs::path out = argv[1], shared = argv[2];
  int n = 0;
  for (const char* m : {"stories260K.gguf", "needle-v1-3.7M-f32.gguf", "needle-v1-3.7M-q4_0.gguf", "needle-3.7M-q8_0.gguf",
                        "needle-3.7M-q4_k_m.gguf", "needle-3.7M-q5_1.gguf", "needle-3.7M-q2_k.gguf",
                        "qwen2-tiny-random.gguf"}) {
    auto f = kvtrim::io::GgufFile::Open((shared / "models" / m).string());
    if (!f.ok()) {
      std::fprintf(stderr, "skipping %s: %s\n", m, f.error().message.c_str());
      continue;
    }
    Write(out / "gguf" / (std::string("tiny-") + m), Shrink(*f.value()));
    ++n;
  }
  int s = 0;
  for (const auto& b : Synthetic()) Write(out / "gguf" / ("synthetic-" + std::to_string(s++) + ".gguf"), b);
  // Tokenizer: selector byte (vocabulary, add_bos, parse_special) + text.
  std::string prose;
  {
    std::ifstream f(shared / "data" / "frankenstein.txt", std::ios::binary);
    prose.assign(std::istreambuf_iterator<char>(f), {});
  }
  const std::vector<std::string> texts = {
      prose.substr(std::min<size_t>(prose.size(), 5000), 400), prose.substr(std::min<size_t>(prose.size(), 20000), 120),
      "Hello world", "  two  spaces\tand\ttabs\n\nnewlines", "caf\xC3\xA9 \xE2\x82\xAC 100 \xF0\x9F\x98\x80 emoji",
      "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E", "<s></s><unk><|im_start|>user\nhi<|im_end|>", "1234567 is the number.",
      "\xFF\xFE invalid \xC3 utf8 \x80", ""};
  int t = 0;
  for (const auto& text : texts)
    for (uint8_t sel : {0, 1, 2, 5, 9}) Write(out / "tokenizer" / ("t" + std::to_string(t++)), std::string(1, static_cast<char>(sel)) + text);
  // Plans: seeded random bytes of a few lengths.
  std::mt19937 rng(42);
  for (int i = 0; i < 32; ++i) {
    std::string b(16 + 24 * i, '\0');
    for (char& c : b) c = static_cast<char>(rng());
    Write(out / "plan" / ("p" + std::to_string(i)), b);
  }
  // Request bodies: selector byte (0 completion, 1 chat, 2 context, 6
  // conversation, 7 slot filename; fuzz_request.cpp) + JSON.
  const std::vector<std::pair<char, std::string>> bodies = {
      {0, R"({"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0, "seed": 7})"},
      {0, R"({"prompt": "x", "stream": true, "stop": ["\n", "."], "top_p": 0.5, "kv": "snapkv", "kv_ratio": 0.25})"},
      {0, R"({"prompt": "q", "context_id": "ctx-1", "return_tokens": true})"},
      {0, R"({"prompt": "y", "kv": "h2o", "kv_budget": 40, "kv_quant": "q8_0", "kv_params": {"sink-guard": 4}})"},
      {1, R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]})"},
      {1, R"({"messages": [{"role": "user", "content": "Hi"}], "kv": "window", "kv_params": {"sinks": 2}})"},
      {2, R"({"text": "a long document", "kv": "snapkv", "kv_ratio": 0.5})"},
      {2, R"({"text": "doc", "kv": "razor", "kv_params": {"value-norm": "l2"}})"},
      {1, R"({"messages": [{"role": "user", "content": "Hi"}], "conversation": "c-1", "kv": "snapkv", "kv_budget": 64})"},
      {6, R"({"id": "talk_1", "kv": "keydiff", "kv_ratio": 0.1})"}, {6, ""}, {6, R"({"id": "../x"})"},
      {7, R"({"filename": "slot0.bin"})"}, {7, R"({"filename": "../../etc/passwd"})"},
      {0, R"({"prompt": 5})"}, {0, "{"}, {1, "[]"}, {2, R"({"text": "\ud800"})"}};
  int q = 0;
  for (const auto& [sel, body] : bodies) Write(out / "request" / ("r" + std::to_string(q++)), std::string(1, sel) + body);
  std::printf("seeds: %d tiny models, %d synthetic GGUF, %d tokenizer inputs, 32 plans, %d requests in %s\n", n, s, t, q,
              out.c_str());
  return 0;
}
