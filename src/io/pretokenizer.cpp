#include "io/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>

namespace kvtrim::io {
namespace {

// The patterns are llama.cpp's (src/llama-vocab.cpp), i.e. the regexes of
// the models' tokenizer.json with "(?i:'s|...)" spelled out case by case.
const char* const kGpt2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
const char* const kLlama3 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* const kQwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

struct Known {
  std::vector<std::string> names;
  std::vector<std::string> patterns;
};

const std::vector<Known>& KnownTable() {
  static const std::vector<Known> t = {
      {{"gpt2", "gpt-2", "phi-2", "roberta-bpe"}, {kGpt2}},
      {{"default"},
       {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+", "[0-9][0-9][0-9]"}},
      {{"llama-bpe", "llama3", "llama-v3", "falcon3"}, {kLlama3}},
      {{"qwen2", "deepseek-r1-qwen", "stablelm2"}, {kQwen2}},
      {{"deepseek-llm"},
       {
        "[\r\n]",
        "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
        "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
        "\\s+$",
        "[一-龥ࠀ-一가-퟿]+",
        "\\p{N}+",
       }},
      {{"deepseek-coder"}, {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[一-龥ࠀ-一가-퟿]+", "\\p{N}"}},
  };
  return t;
}

}  // namespace

struct Pretokenizer::Regex {
  std::string pattern;
  pcre2_code* code = nullptr;
  ~Regex() { pcre2_code_free(code); }
};

std::vector<std::string> Pretokenizer::KnownNames() {
  std::vector<std::string> out;
  for (const auto& k : KnownTable()) out.insert(out.end(), k.names.begin(), k.names.end());
  return out;
}

Expected<Pretokenizer> Pretokenizer::Create(const std::string& name) {
  for (const auto& k : KnownTable())
    if (std::find(k.names.begin(), k.names.end(), name) != k.names.end()) return FromPatterns(name, k.patterns);
  std::string known;
  for (const auto& n : KnownNames()) known += (known.empty() ? "" : ", ") + n;
  return MakeError("tokenizer.ggml.pre = '" + name + "' is not a known pre-tokenizer (known: " + known + ")");
}

Expected<Pretokenizer> Pretokenizer::FromPatterns(const std::string& name, const std::vector<std::string>& patterns) {
  Pretokenizer p;
  p.name_ = name;
  for (const auto& pat : patterns) {
    auto re = std::make_shared<Regex>();
    re->pattern = pat;
    int err = 0;
    PCRE2_SIZE off = 0;
    // DOLLAR_ENDONLY: "$" is the end of the piece only (as in std::regex and
    // Python), not also before a final newline. MATCH_INVALID_UTF: invalid
    // UTF-8 in the text never matches instead of failing the whole match.
    re->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pat.data()), pat.size(),
                             PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY | PCRE2_MATCH_INVALID_UTF, &err, &off,
                             nullptr);
    if (!re->code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      return MakeError("pre-tokenizer '" + name + "': regex '" + pat + "' does not compile at offset " +
                       std::to_string(off) + ": " + reinterpret_cast<const char*>(msg));
    }
    pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE);  // optional: pcre2_match falls back to the interpreter
    p.regexes_.push_back(std::move(re));
  }
  return p;
}

namespace {

// Appends the matches of `code` in `seg` and the gaps between them to `out`.
void SplitOne(const pcre2_code* code, pcre2_match_data* md, std::string_view seg,
              std::vector<std::string_view>* out) {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(seg.data());
  size_t pos = 0, last = 0;
  while (pos < seg.size()) {
    int rc = pcre2_match(code, subject, seg.size(), pos, 0, md, nullptr);
    if (rc < 0 && rc != PCRE2_ERROR_NOMATCH)  // e.g. the JIT stack ran out: the interpreter has no such limit
      rc = pcre2_match(code, subject, seg.size(), pos, PCRE2_NO_JIT, md, nullptr);
    if (rc < 0) break;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t s = ov[0], e = ov[1];
    if (e <= s) {  // empty match: step over one character
      pos = s + 1;
      while (pos < seg.size() && (static_cast<unsigned char>(seg[pos]) & 0xC0) == 0x80) ++pos;
      continue;
    }
    if (s > last) out->push_back(seg.substr(last, s - last));
    out->push_back(seg.substr(s, e - s));
    last = pos = e;
  }
  if (last < seg.size()) out->push_back(seg.substr(last));
}

}  // namespace

std::vector<std::string_view> Pretokenizer::Split(std::string_view text) const {
  std::vector<std::string_view> cur, next;
  if (!text.empty()) cur.push_back(text);
  for (const auto& re : regexes_) {
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(re->code, nullptr);
    next.clear();
    next.reserve(cur.size() * 2);
    for (std::string_view seg : cur) SplitOne(re->code, md, seg, &next);
    pcre2_match_data_free(md);
    cur.swap(next);
  }
  return cur;
}

}  // namespace kvtrim::io
