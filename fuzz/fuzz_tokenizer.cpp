// libFuzzer target: the tokenizer on arbitrary bytes. The vocabularies come
// from GGUF files (KVTRIM_FUZZ_VOCABS, colon-separated; default: the shared
// models), so any tokenizer Tokenizer::FromGguf builds (SentencePiece today,
// BPE once it lands: add a BPE model to the list) is covered. The first input
// byte picks the vocabulary and the flags, the rest is the text.
// Properties: every id is a token of the vocabulary; with byte fallback for
// all 256 bytes, Decode(Encode(text)) == text for valid UTF-8 text (special
// parsing off, no literal U+2581, the SentencePiece space marker, in it).
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "io/tokenizer.h"

namespace {

struct Vocab {
  std::string name;
  std::unique_ptr<kvtrim::io::GgufFile> file;
  std::unique_ptr<kvtrim::io::Tokenizer> tok;
};
std::vector<Vocab>* g_vocabs = nullptr;

bool ValidUtf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = s[i];
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return false;
    i += n;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_vocabs = new std::vector<Vocab>();
  const char* env = std::getenv("KVTRIM_FUZZ_VOCABS");
  std::string list = env ? env : KVTRIM_FUZZ_DEFAULT_VOCABS;
  std::stringstream ss(list);
  for (std::string path; std::getline(ss, path, ':');) {
    if (path.empty()) continue;
    auto f = kvtrim::io::GgufFile::Open(path);
    if (!f.ok()) {
      std::fprintf(stderr, "fuzz_tokenizer: skipping %s: %s\n", path.c_str(), f.error().message.c_str());
      continue;
    }
    auto t = kvtrim::io::Tokenizer::FromGguf(*f.value());
    if (!t.ok()) {
      std::fprintf(stderr, "fuzz_tokenizer: skipping %s: %s\n", path.c_str(), t.error().message.c_str());
      continue;
    }
    g_vocabs->push_back({path, std::move(f.value()), std::make_unique<kvtrim::io::Tokenizer>(std::move(t.value()))});
    std::fprintf(stderr, "fuzz_tokenizer: vocabulary %s (%d tokens)\n", path.c_str(), g_vocabs->back().tok->vocab_size());
  }
  if (g_vocabs->empty()) {
    std::fprintf(stderr, "fuzz_tokenizer: no vocabulary could be loaded (set KVTRIM_FUZZ_VOCABS)\n");
    std::abort();
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t sel = data[0];
  const Vocab& v = (*g_vocabs)[(sel >> 2) % g_vocabs->size()];
  const bool add_bos = sel & 1, parse_special = sel & 2;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  const kvtrim::io::Tokenizer& tk = *v.tok;
  std::vector<int> ids = tk.Encode(text, add_bos, parse_special);
  for (int id : ids)
    if (id < 0 || id >= tk.vocab_size()) {
      std::fprintf(stderr, "%s: id %d outside the vocabulary of %d\n", v.name.c_str(), id, tk.vocab_size());
      std::abort();
    }
  // BOS leads when asked AND the model asks for one (tokenizer.ggml.add_bos_token;
  // byte-level BPE vocabularies default to none).
  const bool bos_added = add_bos && tk.add_bos() && tk.bos() >= 0;
  if (bos_added && (ids.empty() || ids[0] != tk.bos())) std::abort();
  if (bos_added) ids.erase(ids.begin());
  const std::string back = tk.Decode(ids);
  // Decoding arbitrary ids must not crash either.
  std::vector<int> raw;
  for (size_t i = 1; i + 1 < size && raw.size() < 64; i += 2) raw.push_back((data[i] | data[i + 1] << 8) - 16);
  (void)tk.Decode(raw);
  const bool round_trip = !parse_special && tk.n_byte_tokens() == 256 && ValidUtf8(text) &&
                          text.find("\xE2\x96\x81") == std::string::npos;
  if (round_trip && back != text) {
    std::fprintf(stderr, "%s: round trip failed: %zu bytes in, %zu bytes out\n", v.name.c_str(), text.size(),
                 back.size());
    std::abort();
  }
  return 0;
}
