#include "io/tokenizer.h"

#include <cstdio>
#include <queue>

namespace kvtrim::io {
namespace {

const std::string kSentencePieceSpace = "\xE2\x96\x81";  // U+2581 "▁"

size_t Utf8Len(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c >> 5) == 0x6) return 2;
  if ((c >> 4) == 0xE) return 3;
  if ((c >> 3) == 0x1E) return 4;
  return 1;  // stray continuation byte: a symbol of its own
}

struct Symbol {
  int prev, next;
  size_t start, len;
};

struct Bigram {
  int left, right;
  float score;
  size_t len;
  bool operator<(const Bigram& o) const {  // max-heap: higher score, then leftmost
    return score < o.score || (score == o.score && left > o.left);
  }
};

}  // namespace

Expected<Tokenizer> Tokenizer::FromGguf(const GgufFile& f) {
  auto model = f.GetString("tokenizer.ggml.model");
  if (!model.ok()) return model.error();
  if (model.value() != "llama") {
    return MakeError("unsupported tokenizer model '" + model.value() + "' (supported: llama)");
  }
  auto toks = f.GetArray("tokenizer.ggml.tokens", GgufValueType::STRING);
  if (!toks.ok()) return toks.error();
  Tokenizer tk;
  const size_t n = toks.value()->size();
  if (n == 0) return MakeError("tokenizer.ggml.tokens is empty");
  if (n > kGgufMaxVocab) {
    return MakeError("tokenizer.ggml.tokens has " + std::to_string(n) + " tokens, over the limit of " +
                     std::to_string(kGgufMaxVocab) + " (kGgufMaxVocab)");
  }
  tk.pieces_.reserve(n);
  for (const auto& v : *toks.value()) tk.pieces_.push_back(std::get<std::string>(v.v));
  tk.scores_.assign(n, 0.f);
  if (f.Find("tokenizer.ggml.scores")) {
    auto sc = f.GetArray("tokenizer.ggml.scores", GgufValueType::F32);
    if (!sc.ok()) return sc.error();
    if (sc.value()->size() != n) return MakeError("tokenizer.ggml.scores has a different length than tokens");
    for (size_t i = 0; i < n; ++i) tk.scores_[i] = static_cast<float>((*sc.value())[i].as_float());
  }
  tk.types_.assign(n, TokenType::kNormal);
  if (f.Find("tokenizer.ggml.token_type")) {
    auto ty = f.GetArray("tokenizer.ggml.token_type", GgufValueType::I32);
    if (!ty.ok()) return ty.error();
    if (ty.value()->size() != n) return MakeError("tokenizer.ggml.token_type has a different length than tokens");
    for (size_t i = 0; i < n; ++i) {
      int64_t t = (*ty.value())[i].as_int();
      if (t < 1 || t > 6) return MakeError("bad token type " + std::to_string(t) + " for token " + std::to_string(i));
      tk.types_[i] = static_cast<TokenType>(t);
    }
  }
  auto id_key = [&](const char* key, int* out) -> Status {
    if (!f.Find(key)) return {};
    auto v = f.GetInt(key);
    if (!v.ok()) return v.error();
    if (v.value() < 0 || v.value() >= static_cast<int64_t>(n)) {
      return MakeError(std::string(key) + " = " + std::to_string(v.value()) + " is not a token id");
    }
    *out = static_cast<int>(v.value());
    return {};
  };
  KVTRIM_RETURN_IF_ERROR(id_key("tokenizer.ggml.bos_token_id", &tk.bos_));
  KVTRIM_RETURN_IF_ERROR(id_key("tokenizer.ggml.eos_token_id", &tk.eos_));
  KVTRIM_RETURN_IF_ERROR(id_key("tokenizer.ggml.unknown_token_id", &tk.unk_));
  if (tk.bos_ >= static_cast<int>(n) || tk.eos_ >= static_cast<int>(n)) return MakeError("BOS/EOS id outside the vocabulary");
  if (f.Find("tokenizer.ggml.add_bos_token")) {
    auto b = f.GetBool("tokenizer.ggml.add_bos_token");
    if (!b.ok()) return b.error();
    tk.add_bos_ = b.value();
  }
  if (f.Find("tokenizer.ggml.add_space_prefix")) {
    auto b = f.GetBool("tokenizer.ggml.add_space_prefix");
    if (!b.ok()) return b.error();
    tk.add_space_prefix_ = b.value();
  }
  bool has_marker = false;
  for (size_t i = 0; i < n && !has_marker; ++i)
    has_marker = tk.types_[i] == TokenType::kNormal && tk.pieces_[i].find(kSentencePieceSpace) != std::string::npos;
  if (!has_marker) tk.space_ = " ";
  for (int& b : tk.byte_ids_) b = -1;
  for (size_t i = 0; i < n; ++i) {
    const std::string& p = tk.pieces_[i];
    if (tk.types_[i] == TokenType::kNormal || tk.types_[i] == TokenType::kUserDefined) {
      tk.index_.emplace(p, static_cast<int>(i));
    } else if (tk.types_[i] == TokenType::kByte) {
      unsigned v = 0;
      if (p.size() == 6 && std::sscanf(p.c_str(), "<0x%02X>", &v) == 1 && v < 256) tk.byte_ids_[v] = static_cast<int>(i);
    }
  }
  return tk;
}

int Tokenizer::n_byte_tokens() const {
  int c = 0;
  for (int b : byte_ids_) c += b >= 0;
  return c;
}

int Tokenizer::Lookup(const std::string& s) const {
  auto it = index_.find(s);
  return it == index_.end() ? -1 : it->second;
}

std::vector<int> Tokenizer::Encode(const std::string& text, bool add_bos, bool /*parse_special*/) const {
  std::vector<int> out;
  if (add_bos) out.push_back(bos_);
  if (text.empty()) return out;
  // Normalize: dummy prefix, spaces to "▁".
  std::string s = add_space_prefix_ ? space_ : "";
  for (char c : text) {
    if (c == ' ') s += space_;
    else s += c;
  }
  // Initial symbols: UTF-8 characters.
  std::vector<Symbol> sym;
  for (size_t i = 0; i < s.size();) {
    size_t len = std::min(Utf8Len(static_cast<unsigned char>(s[i])), s.size() - i);
    sym.push_back({static_cast<int>(sym.size()) - 1, static_cast<int>(sym.size()) + 1, i, len});
    i += len;
  }
  sym.back().next = -1;
  std::priority_queue<Bigram> agenda;
  auto try_add = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    std::string piece = s.substr(sym[l].start, sym[l].len + sym[r].len);
    int id = Lookup(piece);
    if (id >= 0) agenda.push({l, r, scores_[id], piece.size()});
  };
  for (size_t i = 1; i < sym.size(); ++i) try_add(static_cast<int>(i) - 1, static_cast<int>(i));
  while (!agenda.empty()) {
    Bigram b = agenda.top();
    agenda.pop();
    Symbol& L = sym[b.left];
    Symbol& R = sym[b.right];
    if (L.len == 0 || R.len == 0 || L.len + R.len != b.len || L.next != b.right) continue;  // stale
    L.len += R.len;
    R.len = 0;
    L.next = R.next;
    if (R.next >= 0) sym[R.next].prev = b.left;
    try_add(L.prev, b.left);
    try_add(b.left, L.next);
  }
  for (int i = 0; i >= 0 && i < static_cast<int>(sym.size()); i = sym[i].next) {
    if (sym[i].len == 0) continue;
    std::string piece = s.substr(sym[i].start, sym[i].len);
    int id = Lookup(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (unsigned char c : piece) out.push_back(byte_ids_[c] >= 0 ? byte_ids_[c] : unk_);
  }
  return out;
}

std::string Tokenizer::Piece(int prev, int id) const {
  if (id < 0 || id >= vocab_size()) return {};
  switch (types_[id]) {
    case TokenType::kControl:
    case TokenType::kUnused:
      return {};
    case TokenType::kByte: {
      unsigned v = 0;
      if (std::sscanf(pieces_[id].c_str(), "<0x%02X>", &v) == 1) return std::string(1, static_cast<char>(v));
      return {};
    }
    default: break;
  }
  std::string out;
  const std::string& p = pieces_[id];
  for (size_t i = 0; i < p.size();) {
    if (p.compare(i, space_.size(), space_) == 0) {
      out += ' ';
      i += space_.size();
    } else {
      out += p[i++];
    }
  }
  // SentencePiece drops the dummy-prefix space of the first piece after BOS.
  if (add_space_prefix_ && (prev < 0 || prev == bos_) && !out.empty() && out[0] == ' ') out.erase(0, 1);
  return out;
}

std::string Tokenizer::Decode(const std::vector<int>& ids) const {
  std::string out;
  int prev = -1;
  for (int id : ids) {
    out += Piece(prev, id);
    prev = id;
  }
  return out;
}

}  // namespace kvtrim::io
