#include "io/bpe.h"

#include <array>
#include <queue>

namespace kvtrim::io {
namespace {

std::string Utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {  // the mapping stays below U+0144; kept general for DecodeText's callers
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

bool Printable(unsigned b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); }

struct ByteTables {
  std::array<std::string, 256> to_utf8;
  std::array<int, 512> from_cp;  // code point -> byte, -1 elsewhere
  ByteTables() {
    from_cp.fill(-1);
    uint32_t next = 256;
    for (unsigned b = 0; b < 256; ++b) {
      const uint32_t cp = Printable(b) ? b : next++;
      to_utf8[b] = Utf8(cp);
      from_cp[cp] = static_cast<int>(b);
    }
  }
};

const ByteTables& Tables() {
  static const ByteTables t;
  return t;
}

// Decodes the UTF-8 sequence at s[i] (advancing i); invalid bytes decode as
// themselves, one at a time.
uint32_t NextCodePoint(std::string_view s, size_t* i) {
  const auto c = static_cast<unsigned char>(s[*i]);
  size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || *i + len > s.size()) {
    ++*i;
    return 0x110000 + c;  // no byte's image
  }
  uint32_t cp = len == 1 ? c : c & (0x7F >> len);
  for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[*i + k]) & 0x3F);
  *i += len;
  return cp;
}

struct Symbol {
  int prev, next;
  int id;  // token id of the symbol's text, -1 when it is none
  uint32_t start, len;  // raw bytes of the word
};

struct Pair {
  int rank, left, right, left_id, right_id, result;
  bool operator<(const Pair& o) const {  // max-heap on "better": lower rank, then leftmost
    return rank > o.rank || (rank == o.rank && left > o.left);
  }
};

}  // namespace

const std::string& ByteToUnicode(unsigned char b) { return Tables().to_utf8[b]; }

int UnicodeToByte(uint32_t cp) { return cp < Tables().from_cp.size() ? Tables().from_cp[cp] : -1; }

std::string BpeModel::DecodeText(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t start = i;
    const int b = UnicodeToByte(NextCodePoint(text, &i));
    if (b >= 0) out += static_cast<char>(b);
    else out.append(text.substr(start, i - start));
  }
  return out;
}

Expected<BpeModel> BpeModel::Build(const std::vector<std::string>& tokens, const GgufArray& merges, bool ignore_merges) {
  BpeModel m;
  m.ignore_merges_ = ignore_merges;
  m.index_.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) m.index_.insert_or_assign(tokens[i], static_cast<int>(i));  // last id wins
  for (unsigned b = 0; b < 256; ++b) m.byte_token_[b] = m.Lookup(ByteToUnicode(static_cast<unsigned char>(b)));
  m.merges_.reserve(merges.size());
  const char* key = "tokenizer.ggml.merges";
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto* s = std::get_if<std::string>(&merges[r].v);
    if (!s) return MakeError(std::string(key) + "[" + std::to_string(r) + "] is not a string");
    const size_t sp = s->find(' ', 1);
    auto where = [&] { return std::string(key) + "[" + std::to_string(r) + "] = '" + *s + "'"; };
    if (sp == std::string::npos) return MakeError(where() + " is not two tokens separated by a space");
    const std::string_view left(s->data(), sp), right(s->data() + sp + 1, s->size() - sp - 1);
    const int l = m.Lookup(left), rt = m.Lookup(right);
    if (l < 0) return MakeError(where() + " names '" + std::string(left) + "', which is not a token");
    if (rt < 0) return MakeError(where() + " names '" + std::string(right) + "', which is not a token");
    std::string joined(left);
    joined += right;
    m.merges_.emplace(Key(l, rt), Merge{static_cast<int>(r), m.Lookup(joined)});  // the first rank of a pair wins
  }
  return m;
}

int BpeModel::Lookup(std::string_view text) const {
  auto it = index_.find(text);
  return it == index_.end() ? -1 : it->second;
}

// A symbol whose text is no token: each byte of its byte-level text alone,
// where that is a token (llama.cpp's fallback; unreachable for vocabularies
// holding all 256 byte characters).
void BpeModel::EmitUnknown(std::string_view raw, std::vector<int>* out) const {
  std::string enc;
  for (unsigned char c : raw) enc += ByteToUnicode(c);
  for (char c : enc) {
    const int id = Lookup(std::string_view(&c, 1));
    if (id >= 0) out->push_back(id);
  }
}

void BpeModel::EncodeWord(std::string_view word, std::vector<int>* out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    std::string enc;
    for (unsigned char c : word) enc += ByteToUnicode(c);
    const int id = Lookup(enc);
    if (id >= 0) {
      out->push_back(id);
      return;
    }
  }
  // One symbol per byte: every byte is one character of the byte-level text.
  std::vector<Symbol> sym(word.size());
  for (size_t i = 0; i < word.size(); ++i) {
    sym[i] = {static_cast<int>(i) - 1, i + 1 < word.size() ? static_cast<int>(i) + 1 : -1,
              byte_token_[static_cast<unsigned char>(word[i])], static_cast<uint32_t>(i), 1};
  }
  std::priority_queue<Pair> queue;
  auto add = [&](int l, int r) {
    if (l < 0 || r < 0 || sym[l].id < 0 || sym[r].id < 0) return;
    auto it = merges_.find(Key(sym[l].id, sym[r].id));
    if (it != merges_.end()) queue.push({it->second.rank, l, r, sym[l].id, sym[r].id, it->second.result});
  };
  for (size_t i = 1; i < sym.size(); ++i) add(static_cast<int>(i) - 1, static_cast<int>(i));
  while (!queue.empty()) {
    const Pair p = queue.top();
    queue.pop();
    Symbol& L = sym[p.left];
    Symbol& R = sym[p.right];
    // Stale when either side has merged since: ids and adjacency identify the texts.
    if (L.len == 0 || R.len == 0 || L.next != p.right || L.id != p.left_id || R.id != p.right_id) continue;
    L.len += R.len;
    L.id = p.result;
    R.len = 0;
    L.next = R.next;
    if (R.next >= 0) sym[R.next].prev = p.left;
    add(L.prev, p.left);
    add(p.left, L.next);
  }
  for (int i = 0; i >= 0; i = sym[i].next) {
    if (sym[i].id >= 0) out->push_back(sym[i].id);
    else EmitUnknown(word.substr(sym[i].start, sym[i].len), out);
  }
}

}  // namespace kvtrim::io
