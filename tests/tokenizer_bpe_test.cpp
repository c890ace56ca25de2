// Byte-level BPE, the pre-tokenizers and special tokens: llama.cpp's
// reference tokenizations of real vocabularies (../shared/vocab), a
// hand-made vocabulary with closed-form answers, and bad metadata.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "io/gguf_writer.h"
#include "io/bpe.h"
#include "io/gguf.h"
#include "io/pretokenizer.h"
#include "io/tokenizer.h"
#include "test_util.h"

namespace kvtrim {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

using io::GgufValue;
using io::GgufValueType;

// ---- llama.cpp's test vectors ------------------------------------------------

struct VocabCase {
  std::string text;
  std::vector<int> ids;
};

// Splits X.inp at "\n__ggml_vocab_test__\n" exactly as llama.cpp's
// tests/test-tokenizer-0.cpp does (the file ends with a separator, so no
// empty last string) and pairs each string with line i of X.out.
std::vector<VocabCase> ReadVocabCases(const std::string& base) {
  const std::string raw = test::ReadFile(base + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t pos = 0; pos < raw.size();) {
    const size_t next = raw.find(sep, pos);
    if (next == std::string::npos) {
      texts.push_back(raw.substr(pos));
      break;
    }
    texts.push_back(raw.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::istringstream out(test::ReadFile(base + ".out"));
  std::vector<VocabCase> cases;
  std::string line;
  for (size_t i = 0; std::getline(out, line); ++i) {
    VocabCase c;
    if (i < texts.size()) c.text = texts[i];
    std::istringstream ls(line);
    for (int id; ls >> id;) c.ids.push_back(id);
    cases.push_back(std::move(c));
  }
  EXPECT_EQ(cases.size(), texts.size()) << base;
  return cases;
}

void CheckVocab(const std::string& name, io::Tokenizer::Model model) {
  const std::string base = test::SharedPath("vocab/" + name);
  if (!std::filesystem::exists(base)) GTEST_SKIP() << base << " is absent";
  auto f = io::GgufFile::Open(base);
  ASSERT_TRUE(f.ok()) << f.error().message;
  auto tok = io::Tokenizer::FromGguf(*f.value());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ(tok->model(), model);
  const auto cases = ReadVocabCases(base);
  ASSERT_GE(cases.size(), 40u);
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    EXPECT_EQ(tok->Encode(c.text, false), c.ids) << name << " case " << i << ": '" << c.text << "'";
    EXPECT_EQ(tok->Decode(tok->Encode(c.text, false)), c.text) << name << " case " << i;
  }
}

TEST(TokenizerVocab, Gpt2MatchesLlamaCpp) { CheckVocab("ggml-vocab-gpt-2.gguf", io::Tokenizer::Model::kByteLevelBpe); }
TEST(TokenizerVocab, DeepseekLlmMatchesLlamaCpp) {
  CheckVocab("ggml-vocab-deepseek-llm.gguf", io::Tokenizer::Model::kByteLevelBpe);
}
TEST(TokenizerVocab, LlamaSentencePieceMatchesLlamaCpp) {
  CheckVocab("ggml-vocab-llama-spm.gguf", io::Tokenizer::Model::kSentencePiece);
}

// The whole of frankenstein.txt (420,798 bytes) against llama.cpp's
// llama-tokenize (commit c392e509, --no-bos --no-parse-special): the token
// count and an FNV-1a hash of the ids it printed.
TEST(TokenizerVocab, WholeNovelMatchesLlamaCpp) {
  const std::string text_path = test::SharedPath("data/frankenstein.txt");
  if (!std::filesystem::exists(text_path) || !std::filesystem::exists(test::SharedPath("vocab")))
    GTEST_SKIP() << "shared data absent";
  const std::string text = test::ReadFile(text_path);
  ASSERT_EQ(text.size(), 420798u);
  struct Want {
    const char* name;
    size_t n;
    uint64_t fnv;
  };
  for (const Want& w : {Want{"ggml-vocab-gpt-2.gguf", 93562, 0x8c4865ec73090e9eull},
                        Want{"ggml-vocab-deepseek-llm.gguf", 90770, 0x371ff6d053023146ull},
                        Want{"ggml-vocab-llama-spm.gguf", 101630, 0xecafb67abb3e62c2ull}}) {
    auto f = io::GgufFile::Open(test::SharedPath(std::string("vocab/") + w.name));
    ASSERT_TRUE(f.ok()) << f.error().message;
    auto tok = io::Tokenizer::FromGguf(*f.value());
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    const std::vector<int> ids = tok->Encode(text, false);
    uint64_t h = 0xcbf29ce484222325ull;
    for (int id : ids) h = (h ^ static_cast<uint32_t>(id)) * 0x100000001b3ull;
    EXPECT_EQ(ids.size(), w.n) << w.name;
    EXPECT_EQ(h, w.fnv) << w.name;
  }
}

// Any other vocabulary added to ../shared/vocab (with its .inp/.out) is checked too.
TEST(TokenizerVocab, EveryOtherFileInSharedVocab) {
  const std::string dir = test::SharedPath("vocab");
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << dir << " is absent";
  const std::vector<std::string> named = {"ggml-vocab-gpt-2.gguf", "ggml-vocab-deepseek-llm.gguf",
                                          "ggml-vocab-llama-spm.gguf"};
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() != ".gguf" || std::find(named.begin(), named.end(), name) != named.end()) continue;
    if (!std::filesystem::exists(e.path().string() + ".inp")) continue;
    SCOPED_TRACE(name);
    auto f = io::GgufFile::Open(e.path().string());
    ASSERT_TRUE(f.ok()) << f.error().message;
    auto tok = io::Tokenizer::FromGguf(*f.value());
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    for (const auto& c : ReadVocabCases(e.path().string())) {
      EXPECT_EQ(tok->Encode(c.text, false), c.ids) << "'" << c.text << "'";
      EXPECT_EQ(tok->Decode(tok->Encode(c.text, false)), c.text);
    }
  }
}

TEST(TokenizerVocab, TokenizeCommandPrintsTheReferenceIds) {
  const std::string base = test::SharedPath("vocab/ggml-vocab-gpt-2.gguf");
  if (!std::filesystem::exists(base)) GTEST_SKIP() << base << " is absent";
  const std::string cli = KVTRIM_CLI;
  // "Hello world" is a case of the .inp; its reference ids are 15496 995.
  auto r = test::RunCommand(cli + " tokenize -m " + base + " --ids --no-bos 'Hello world'");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "15496 995\n");
  r = test::RunCommand(cli + " tokenize -m " + base + " 'Hello world'");
  EXPECT_EQ(r.out, "15496\t'Hello'\n995\t' world'\n");
  // Pieces escaped: a tab, and the bytes of a character split over tokens.
  const std::string path = ::testing::TempDir() + "tokenize_escape.txt";
  std::ofstream(path, std::ios::binary) << "a\t\xe6\x9d\xb1";
  r = test::RunCommand(cli + " tokenize -m " + base + " -f " + path);
  EXPECT_EQ(r.out, "64\t'a'\n197\t'\\t'\n30266\t'\\xe6\\x9d'\n109\t'\\xb1'\n");
  // <|endoftext|> (50256, control) only with --special.
  r = test::RunCommand(cli + " tokenize -m " + base + " --ids --special 'a<|endoftext|>'");
  EXPECT_EQ(r.out, "64 50256\n");
  r = test::RunCommand(cli + " tokenize -m " + base + " --ids 'a<|endoftext|>'");
  EXPECT_EQ(r.out.rfind("64 ", 0), 0u) << r.out;
  EXPECT_EQ(r.out.find("50256"), std::string::npos) << r.out;  // plain text
}

// ---- the byte mapping and the pre-tokenizers ----------------------------------

TEST(ByteLevel, MappingIsGpt2s) {
  EXPECT_EQ(io::ByteToUnicode('A'), "A");
  EXPECT_EQ(io::ByteToUnicode(' '), "\xC4\xA0");   // U+0120 'Ġ' (byte 32 is the 33rd unprintable)
  EXPECT_EQ(io::ByteToUnicode('\n'), "\xC4\x8A");  // U+010A 'Ċ'
  EXPECT_EQ(io::ByteToUnicode(0), "\xC4\x80");     // U+0100
  EXPECT_EQ(io::ByteToUnicode(0xAD), "\xC5\x83");  // U+0143: the last of the 68 remapped bytes
  EXPECT_EQ(io::ByteToUnicode(0xE9), "\xC3\xA9");  // printable Latin-1 stays
  std::string all, enc;
  for (int b = 0; b < 256; ++b) {
    all += static_cast<char>(b);
    enc += io::ByteToUnicode(static_cast<unsigned char>(b));
  }
  EXPECT_EQ(io::BpeModel::DecodeText(enc), all);
}

std::vector<std::string> Words(const io::Pretokenizer& p, const std::string& s) {
  std::vector<std::string> out;
  for (auto w : p.Split(s)) out.emplace_back(w);
  return out;
}

TEST(Pretokenizer, Gpt2Llama3Qwen2Splits) {
  auto gpt2 = io::Pretokenizer::Create("gpt2");
  auto llama3 = io::Pretokenizer::Create("llama-bpe");
  auto qwen2 = io::Pretokenizer::Create("qwen2");
  ASSERT_TRUE(gpt2.ok() && llama3.ok() && qwen2.ok());
  using V = std::vector<std::string>;
  EXPECT_EQ(Words(*gpt2, "Hello world's  12345!?\n"), (V{"Hello", " world", "'s", " ", " 12345", "!?", "\n"}));
  EXPECT_EQ(Words(*llama3, "Hello WORLD'S  12345!?\n"), (V{"Hello", " WORLD", "'S", " ", " ", "123", "45", "!?\n"}));
  EXPECT_EQ(Words(*qwen2, "x 123"), (V{"x", " ", "1", "2", "3"}));
  EXPECT_EQ(Words(*gpt2, "\xC3\xA9t\xC3\xA9 \xE6\x9D\xB1"), (V{"\xC3\xA9t\xC3\xA9", " \xE6\x9D\xB1"}));  // \p{L} is Unicode
  EXPECT_TRUE(gpt2->Split("").empty());
}

TEST(Pretokenizer, DeepseekIsASequenceOfRegexes) {
  auto ds = io::Pretokenizer::Create("deepseek-llm");
  ASSERT_TRUE(ds.ok());
  using V = std::vector<std::string>;
  // "[\r\n]" first, then letters with one leading space, punctuation, digits one run.
  EXPECT_EQ(Words(*ds, "Hi there, 2024\nok"), (V{"Hi", " there", ",", " ", "2024", "\n", "ok"}));
  // "\s+$": trailing spaces are a piece of their own.
  EXPECT_EQ(Words(*ds, "a  "), (V{"a", "  "}));
}

TEST(Pretokenizer, DeepseekCoderAndDefaultSequences) {
  auto coder = io::Pretokenizer::Create("deepseek-coder");
  auto def = io::Pretokenizer::Create("default");
  ASSERT_TRUE(coder.ok() && def.ok());
  using V = std::vector<std::string>;
  EXPECT_EQ(Words(*coder, "foo(bar) 12"), (V{"foo", "(", "bar", ")", " ", "1", "2"}));
  // Punctuation runs, then GPT-2's regex, then digit runs, then groups of three digits.
  EXPECT_EQ(Words(*def, "a+b 1234"), (V{"a", "+", "b", " ", "123", "4"}));
}

TEST(Pretokenizer, InvalidUtf8IsKeptInGaps) {
  auto gpt2 = io::Pretokenizer::Create("gpt2");
  ASSERT_TRUE(gpt2.ok());
  std::string s = "ab\xFF" "cd";
  std::string joined;
  for (auto w : gpt2->Split(s)) joined += w;
  EXPECT_EQ(joined, s);
}

TEST(Pretokenizer, UnknownNameIsAnErrorNamingIt) {
  auto p = io::Pretokenizer::Create("klingon-bpe");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("klingon-bpe"), std::string::npos);
  EXPECT_NE(p.error().message.find("tokenizer.ggml.pre"), std::string::npos);
}

// ---- a hand-made byte-level vocabulary -----------------------------------------

GgufValue Str(const std::string& s) { return {GgufValueType::STRING, s, GgufValueType::U8}; }
GgufValue Arr(GgufValueType elem, io::GgufArray a) { return {GgufValueType::ARRAY, std::move(a), elem}; }
GgufValue I32(int v) { return {GgufValueType::I32, static_cast<int64_t>(v), GgufValueType::U8}; }
GgufValue U32(int v) { return {GgufValueType::U32, static_cast<uint64_t>(v), GgufValueType::U8}; }
GgufValue Bool(bool v) { return {GgufValueType::BOOL, v, GgufValueType::U8}; }

struct TinyVocab {
  // ids 0..255: the byte characters; then these, then the special tokens.
  std::vector<std::string> extra = {"ab", "bc", "abc", "\xC4\xA0" "a"};  // 256 257 258 259 ("Ġa": " a")
  std::vector<std::string> merges = {"a b", "b c", "ab c", "\xC4\xA0 a"};
  std::string pre = "gpt2";
  bool with_merges = true;
  int eot = -1;
  int add_bos = -1;  // -1: key absent

  // 260 <|im_start|> (control), 261 <|im_end|> (control), 262 <my> (user-defined), 263 <|bos|> (control)
  std::string Bytes() const {
    io::GgufArray toks, types, mg;
    for (int b = 0; b < 256; ++b) toks.push_back(Str(io::ByteToUnicode(static_cast<unsigned char>(b))));
    for (const auto& e : extra) toks.push_back(Str(e));
    for (const char* s : {"<|im_start|>", "<|im_end|>", "<my>", "<|bos|>"}) toks.push_back(Str(s));
    for (size_t i = 0; i < toks.size(); ++i) types.push_back(I32(1));
    types[260] = types[261] = types[263] = I32(3);
    types[262] = I32(4);
    for (const auto& m : merges) mg.push_back(Str(m));
    io::GgufWriter w;
    w.AddValue("tokenizer.ggml.model", Str("gpt2"));
    w.AddValue("tokenizer.ggml.pre", Str(pre));
    w.AddValue("tokenizer.ggml.tokens", Arr(GgufValueType::STRING, toks));
    w.AddValue("tokenizer.ggml.token_type", Arr(GgufValueType::I32, types));
    if (with_merges) w.AddValue("tokenizer.ggml.merges", Arr(GgufValueType::STRING, mg));
    w.AddValue("tokenizer.ggml.bos_token_id", U32(263));
    w.AddValue("tokenizer.ggml.eos_token_id", U32(261));
    if (eot >= 0) w.AddValue("tokenizer.ggml.eot_token_id", U32(eot));
    if (add_bos >= 0) w.AddValue("tokenizer.ggml.add_bos_token", Bool(add_bos == 1));
    return w.Bytes();
  }
  Expected<io::Tokenizer> Load() const {
    auto f = io::GgufFile::FromBytes(Bytes());
    if (!f.ok()) return f.error();
    return io::Tokenizer::FromGguf(*f.value());
  }
};

TEST(TinyBpe, MergesByRankLowestFirst) {
  TinyVocab v;
  auto t = v.Load();
  ASSERT_TRUE(t.ok()) << t.error().message;
  // "abc": "a b" (rank 0) before "b c" (rank 1), then "ab c" (rank 2) -> abc.
  EXPECT_EQ(t->Encode("abc", false), (std::vector<int>{258}));
  EXPECT_EQ(t->Encode("abcb", false), (std::vector<int>{258, 'b'}));
  // Ranks swapped: "b c" wins, and "a bc" is no merge -> a, bc.
  v.merges = {"b c", "a b", "ab c", "\xC4\xA0 a"};
  auto u = v.Load();
  ASSERT_TRUE(u.ok()) << u.error().message;
  EXPECT_EQ(u->Encode("abc", false), (std::vector<int>{'a', 257}));
  // " ab" is one word for gpt2's regex; the byte ' ' is 'Ġ'. "a b" (rank 0)
  // beats "Ġ a" (rank 3) and leaves Ġ alone; in " ac" Ġ and a merge.
  EXPECT_EQ(t->Encode(" ab", false), (std::vector<int>{' ', 256}));
  EXPECT_EQ(t->Encode(" ac", false), (std::vector<int>{259, 'c'}));
  EXPECT_EQ(t->Decode(t->Encode(" ab\n\xE6\x9D\xB1", false)), " ab\n\xE6\x9D\xB1");
  // A byte outside printable ASCII is its remapped character's id: '\n' = byte 10.
  EXPECT_EQ(t->Encode("\n", false), (std::vector<int>{10}));
}

TEST(TinyBpe, SpecialTokensOnlyWithParseSpecial) {
  auto t = TinyVocab{}.Load();
  ASSERT_TRUE(t.ok()) << t.error().message;
  const std::string s = "<|im_start|>ab<|im_end|>";
  EXPECT_EQ(t->Encode(s, false, true), (std::vector<int>{260, 256, 261}));
  std::vector<int> plain = t->Encode(s, false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 260) + std::count(plain.begin(), plain.end(), 261), 0);
  EXPECT_EQ(plain.size(), 2u + 12 + 10 - 1) << "each character but a-b alone";  // 'ab' merges
  EXPECT_EQ(t->Decode(plain), s);
  // User-defined tokens are matched either way (as llama.cpp and HF do).
  EXPECT_EQ(t->Encode("a<my>", false, false), (std::vector<int>{'a', 262}));
  EXPECT_EQ(t->Decode({'a', 262}), "a<my>");
  EXPECT_EQ(t->Decode({260, 'a'}), "a") << "control tokens print nothing";
}

TEST(TinyBpe, BosEosEotAndAddBosFromMetadata) {
  TinyVocab v;
  auto t = v.Load();
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->bos(), 263);
  EXPECT_EQ(t->eos(), 261);
  EXPECT_EQ(t->eot(), -1);
  EXPECT_FALSE(t->add_bos()) << "gpt2 default: no BOS";
  EXPECT_EQ(t->Encode("a", true), (std::vector<int>{'a'}));
  v.eot = 261;
  v.add_bos = 1;
  auto u = v.Load();
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->eot(), 261);
  EXPECT_TRUE(u->add_bos());
  EXPECT_EQ(u->Encode("a", true), (std::vector<int>{263, 'a'}));
  EXPECT_EQ(u->Encode("a", false), (std::vector<int>{'a'}));
  v.pre = "llama-bpe";  // Llama 3 adds BOS unless the metadata says no
  v.add_bos = 0;
  auto w = v.Load();
  ASSERT_TRUE(w.ok());
  EXPECT_FALSE(w->add_bos());
  v.add_bos = -1;
  auto x = v.Load();
  ASSERT_TRUE(x.ok());
  EXPECT_TRUE(x->add_bos());
}

TEST(TinyBpe, IgnoreMergesTakesWholeWordTokens) {
  // "abc" has no merge path when "ab c" is missing, yet it is a token: Llama 3
  // (ignore_merges) takes it whole, GPT-2 merges to ab, c.
  TinyVocab v;
  v.merges = {"a b", "b c", "\xC4\xA0 a"};
  auto g = v.Load();
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->Encode("abc", false), (std::vector<int>{256, 'c'}));
  v.pre = "llama-bpe";
  auto l = v.Load();
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->Encode("abc", false), (std::vector<int>{258}));
}

TEST(TinyBpe, BadMetadataNamesTheKey) {
  TinyVocab v;
  v.with_merges = false;
  auto a = v.Load();
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.error().message.find("tokenizer.ggml.merges"), std::string::npos) << a.error().message;
  v = TinyVocab{};
  v.merges = {"a b", "b zz"};
  auto b = v.Load();
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("tokenizer.ggml.merges[1]"), std::string::npos) << b.error().message;
  EXPECT_NE(b.error().message.find("'zz'"), std::string::npos) << b.error().message;
  v.merges = {"ab"};
  auto c = v.Load();
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("tokenizer.ggml.merges[0]"), std::string::npos) << c.error().message;
  v = TinyVocab{};
  v.pre = "no-such-pre";
  auto d = v.Load();
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("tokenizer.ggml.pre = 'no-such-pre'"), std::string::npos) << d.error().message;
  v = TinyVocab{};
  v.eot = 9999;
  auto e = v.Load();
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("tokenizer.ggml.eot_token_id"), std::string::npos) << e.error().message;
}

// ---- special tokens in the SentencePiece tokenizer ------------------------------

TEST(TokenizerSpecial, SentencePieceMatchesControlTextsOnlyWhenAsked) {
  auto f = io::GgufFile::Open(test::ModelPath("needle-3.7M-f32.gguf"));
  ASSERT_TRUE(f.ok());
  auto t = io::Tokenizer::FromGguf(*f.value());
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->piece_text(2), "</s>");
  const std::vector<int> with = t->Encode("Hi</s>Hi", false, true);
  const std::vector<int> hi = t->Encode("Hi", false);
  // Hi, </s>, then Hi with the dummy prefix again (it follows a special token).
  std::vector<int> want = hi;
  want.push_back(2);
  want.insert(want.end(), hi.begin(), hi.end());
  EXPECT_EQ(with, want);
  const std::vector<int> without = t->Encode("Hi</s>Hi", false, false);
  EXPECT_EQ(std::count(without.begin(), without.end(), 2), 0);
  EXPECT_EQ(t->Decode(without), "Hi</s>Hi");
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim
