#include "io/tokenizer.h"

#include <algorithm>
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

struct SpSymbol {
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
  Tokenizer tk;
  if (model.value() == "gpt2") {
    tk.model_ = Model::kByteLevelBpe;
    tk.bos_ = tk.eos_ = tk.unk_ = -1;  // only what the metadata names
    tk.add_bos_ = false;
    tk.add_space_prefix_ = false;
  } else if (model.value() != "llama") {
    return MakeError("unsupported tokenizer model '" + model.value() + "' (tokenizer.ggml.model; supported: llama, gpt2)");
  }
  KVTRIM_RETURN_IF_ERROR(tk.LoadCommon(f));
  if (tk.model_ == Model::kByteLevelBpe) KVTRIM_RETURN_IF_ERROR(tk.LoadBpe(f));
  if (tk.model_ == Model::kSentencePiece) tk.IndexSentencePiece();
  // Matchable texts, longest first (ties by id), as llama.cpp partitions.
  for (size_t i = 0; i < tk.pieces_.size(); ++i) {
    const TokenType t = tk.types_[i];
    if (tk.pieces_[i].empty()) continue;
    if (t == TokenType::kControl || t == TokenType::kUnknown) tk.specials_.push_back({static_cast<int>(i), true});
    if (t == TokenType::kUserDefined) tk.specials_.push_back({static_cast<int>(i), false});
  }
  std::stable_sort(tk.specials_.begin(), tk.specials_.end(), [&](const auto& a, const auto& b) {
    return tk.pieces_[a.first].size() > tk.pieces_[b.first].size();
  });
  return tk;
}

// Pieces, scores, token types, special ids and flags: the keys both models share.
Status Tokenizer::LoadCommon(const GgufFile& f) {
  auto toks = f.GetArray("tokenizer.ggml.tokens", GgufValueType::STRING);
  if (!toks.ok()) return toks.error();
  const size_t n = toks.value()->size();
  if (n == 0) return MakeError("tokenizer.ggml.tokens is empty");
  if (n > kGgufMaxVocab) {
    return MakeError("tokenizer.ggml.tokens has " + std::to_string(n) + " tokens, over the limit of " +
                     std::to_string(kGgufMaxVocab) + " (kGgufMaxVocab)");
  }
  pieces_.clear();
  pieces_.reserve(n);
  for (const auto& v : *toks.value()) pieces_.push_back(std::get<std::string>(v.v));
  scores_.assign(n, 0.f);
  if (f.Find("tokenizer.ggml.scores")) {
    auto sc = f.GetArray("tokenizer.ggml.scores", GgufValueType::F32);
    if (!sc.ok()) return sc.error();
    if (sc.value()->size() != n) return MakeError("tokenizer.ggml.scores has a different length than tokens");
    for (size_t i = 0; i < n; ++i) scores_[i] = static_cast<float>((*sc.value())[i].as_float());
  }
  types_.assign(n, TokenType::kNormal);
  if (f.Find("tokenizer.ggml.token_type")) {
    auto ty = f.GetArray("tokenizer.ggml.token_type", GgufValueType::I32);
    if (!ty.ok()) return ty.error();
    if (ty.value()->size() != n) return MakeError("tokenizer.ggml.token_type has a different length than tokens");
    for (size_t i = 0; i < n; ++i) {
      int64_t t = (*ty.value())[i].as_int();
      if (t < 1 || t > 6) return MakeError("bad token type " + std::to_string(t) + " for token " + std::to_string(i));
      types_[i] = static_cast<TokenType>(t);
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
  KVTRIM_RETURN_IF_ERROR(id_key("tokenizer.ggml.bos_token_id", &bos_));
  KVTRIM_RETURN_IF_ERROR(id_key("tokenizer.ggml.eos_token_id", &eos_));
  KVTRIM_RETURN_IF_ERROR(id_key("tokenizer.ggml.eot_token_id", &eot_));
  KVTRIM_RETURN_IF_ERROR(id_key("tokenizer.ggml.unknown_token_id", &unk_));
  if (bos_ >= static_cast<int>(n) || eos_ >= static_cast<int>(n)) return MakeError("BOS/EOS id outside the vocabulary");
  auto bool_key = [&](const char* key, bool* out) -> Status {
    if (!f.Find(key)) return {};
    auto b = f.GetBool(key);
    if (!b.ok()) return b.error();
    *out = b.value();
    return {};
  };
  KVTRIM_RETURN_IF_ERROR(bool_key("tokenizer.ggml.add_bos_token", &add_bos_));
  return bool_key("tokenizer.ggml.add_space_prefix", &add_space_prefix_);
}

// Byte-level BPE: the pre-tokenizer and the merges (after LoadCommon).
Status Tokenizer::LoadBpe(const GgufFile& f) {
  pre_name_ = "default";  // llama.cpp's choice for files without the key
  if (f.Find("tokenizer.ggml.pre")) {
    auto pre = f.GetString("tokenizer.ggml.pre");
    if (!pre.ok()) return pre.error();
    pre_name_ = pre.value();
  }
  auto pt = Pretokenizer::Create(pre_name_);
  if (!pt.ok()) return pt.error();
  pretok_ = std::move(pt.value());
  if (!f.Find("tokenizer.ggml.merges")) return MakeError("missing key 'tokenizer.ggml.merges' (byte-level BPE needs its merges)");
  auto merges = f.GetArray("tokenizer.ggml.merges", GgufValueType::STRING);
  if (!merges.ok()) return merges.error();
  // Llama 3's tokenizer.json sets ignore_merges: a word that is a token is that token.
  const bool ignore_merges = pre_name_ == "llama-bpe" || pre_name_ == "llama3" || pre_name_ == "llama-v3" ||
                             pre_name_ == "falcon3";
  // Llama 3 starts with <|begin_of_text|> unless the metadata says otherwise.
  if (ignore_merges && !f.Find("tokenizer.ggml.add_bos_token")) add_bos_ = true;
  auto bpe = BpeModel::Build(pieces_, *merges.value(), ignore_merges);
  if (!bpe.ok()) return bpe.error();
  bpe_ = std::make_shared<const BpeModel>(std::move(bpe.value()));
  return {};
}

void Tokenizer::IndexSentencePiece() {
  const size_t n = pieces_.size();
  bool has_marker = false;
  for (size_t i = 0; i < n && !has_marker; ++i)
    has_marker = types_[i] == TokenType::kNormal && pieces_[i].find(kSentencePieceSpace) != std::string::npos;
  if (!has_marker) space_.assign(1, ' ');
  for (int& b : byte_ids_) b = -1;
  for (size_t i = 0; i < n; ++i) {
    const std::string& p = pieces_[i];
    if (types_[i] == TokenType::kNormal || types_[i] == TokenType::kUserDefined) {
      index_.emplace(p, static_cast<int>(i));
    } else if (types_[i] == TokenType::kByte) {
      unsigned v = 0;
      if (p.size() == 6 && std::sscanf(p.c_str(), "<0x%02X>", &v) == 1 && v < 256) byte_ids_[v] = static_cast<int>(i);
    }
  }
}

std::string Tokenizer::Describe() const {
  std::string s = model_ == Model::kSentencePiece ? "llama (SentencePiece BPE)" : "gpt2 (byte-level BPE, pre " + pre_name_ + ")";
  s += ", " + std::to_string(vocab_size()) + " pieces";
  if (model_ == Model::kByteLevelBpe) s += ", " + std::to_string(bpe_->n_merges()) + " merges";
  else s += ", " + std::to_string(n_byte_tokens()) + " byte tokens";
  s += ", bos " + std::to_string(bos_) + ", eos " + std::to_string(eos_);
  if (eot_ >= 0) s += ", eot " + std::to_string(eot_);
  s += std::string(", add_bos ") + (add_bos_ ? "yes" : "no");
  if (model_ == Model::kSentencePiece) s += std::string(", space prefix ") + (add_space_prefix_ ? "yes" : "no");
  return s;
}

const std::string& Tokenizer::piece_text(int id) const {
  static const std::string kNone;
  return id >= 0 && id < vocab_size() ? pieces_[id] : kNone;
}

int Tokenizer::n_byte_tokens() const {
  if (model_ == Model::kByteLevelBpe) return 0;
  int c = 0;
  for (int b : byte_ids_) c += b >= 0;
  return c;
}

int Tokenizer::Lookup(const std::string& s) const {
  auto it = index_.find(s);
  return it == index_.end() ? -1 : it->second;
}

// Splits `text` at the occurrences of the matchable token texts, longest
// first, each one over the fragments the longer ones left (llama.cpp's order).
std::vector<Tokenizer::Fragment> Tokenizer::Partition(std::string_view text, bool parse_special) const {
  std::vector<Fragment> frags{{0, text.size(), -1}}, next;
  for (const auto& [id, gated] : specials_) {
    if (gated && !parse_special) continue;
    const std::string& t = pieces_[id];
    next.clear();
    for (const Fragment& fr : frags) {
      if (fr.id >= 0) {
        next.push_back(fr);
        continue;
      }
      size_t pos = fr.start;
      const size_t end = fr.start + fr.len;
      for (size_t m; (m = text.find(t, pos)) != std::string_view::npos && m + t.size() <= end; pos = m + t.size()) {
        if (m > pos) next.push_back({pos, m - pos, -1});
        next.push_back({m, t.size(), id});
      }
      if (pos < end) next.push_back({pos, end - pos, -1});
    }
    frags.swap(next);
  }
  return frags;
}

std::vector<int> Tokenizer::Encode(const std::string& text, bool add_bos, bool parse_special) const {
  std::vector<int> out;
  if (add_bos && add_bos_ && bos_ >= 0) out.push_back(bos_);
  if (text.empty()) return out;
  bool after_special = true;  // SentencePiece: the dummy prefix starts the text and follows each special token
  for (const Fragment& fr : Partition(text, parse_special)) {
    if (fr.id >= 0) {
      out.push_back(fr.id);
      after_special = true;
      continue;
    }
    const std::string_view part(text.data() + fr.start, fr.len);
    if (model_ == Model::kSentencePiece) {
      EncodeSentencePiece(part, add_space_prefix_ && after_special, &out);
    } else {
      for (std::string_view word : pretok_->Split(part)) bpe_->EncodeWord(word, &out);
    }
    after_special = false;
  }
  return out;
}

void Tokenizer::EncodeSentencePiece(std::string_view text, bool prefix, std::vector<int>* out_ids) const {
  std::vector<int>& out = *out_ids;
  if (text.empty()) return;
  // Normalize: dummy prefix, spaces to "▁".
  std::string s = prefix ? space_ : "";
  for (char c : text) {
    if (c == ' ') s += space_;
    else s += c;
  }
  // Initial symbols: UTF-8 characters.
  std::vector<SpSymbol> sym;
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
    SpSymbol& L = sym[b.left];
    SpSymbol& R = sym[b.right];
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
  if (model_ == Model::kByteLevelBpe) {
    return types_[id] == TokenType::kUserDefined ? pieces_[id] : BpeModel::DecodeText(pieces_[id]);
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
