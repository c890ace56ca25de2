// Conversation (include/kvtrim/conversation.h): the template's continuation
// text against the whole transcript formatted at once; a full-cache
// conversation answering each turn exactly as one session fed the whole
// transcript; a budgeted one never holding more than budget + the turn's
// tokens; a saved one continuing where it stopped; Attention Matching
// compacting each turn once, the newest held whole; policies it refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "chat_templates.h"
#include "engine/engine_impl.h"
#include "io/tokenizer.h"
#include "kv/cache.h"
#include "kvtrim/conversation.h"
#include "test_util.h"

namespace kvtrim {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

// Every message's text plus one assistant answer formatted at once equals
// the generation prompt of the history, the answer, then the continuation.
void ExpectContinues(const char* tmpl, const char* family) {
  const std::vector<ChatMessage> first{{"system", "Be brief."}, {"user", "Name a fruit."}};
  const std::vector<ChatMessage> added{{"user", "And a colour?"}};
  const std::string answer = "A pear.";
  std::vector<ChatMessage> history = first;
  history.push_back({"assistant", answer});
  auto cont = ContinuationText(tmpl, history, added, "<s>", "</s>");
  ASSERT_TRUE(cont.ok()) << family << ": " << cont.error().message;
  std::vector<ChatMessage> all = history;
  all.insert(all.end(), added.begin(), added.end());
  const std::string fed = FormatChat(tmpl, first, "<s>", "</s>").text + answer + cont.value();
  EXPECT_EQ(fed, FormatChat(tmpl, all, "<s>", "</s>").text) << family;
}

TEST(ConversationText, ContinuesEveryTemplateFamilyAsTheWholeTranscript) {
  ExpectContinues(test::kChatML, "chatml");
  ExpectContinues(test::kQwen25Instruct, "qwen2.5");
  ExpectContinues(test::kLlama3Instruct, "llama3");
  ExpectContinues(test::kMistral02Instruct, "mistral");
  // Refused: no answer before the new messages.
  EXPECT_FALSE(ContinuationText(test::kChatML, {{"user", "hi"}}, {{"user", "again"}}, "", "").ok());
}

class ConversationTest : public test::DefaultModelTest {
 protected:
  static int Argmax(const std::vector<float>& l) {
    return static_cast<int>(std::max_element(l.begin(), l.end()) - l.begin());
  }
  // Greedy answer of n tokens at most on `s`, fed back but the last (Generate's rule).
  static std::vector<int> Greedy(Session& s, int n) {
    std::vector<int> out;
    for (int i = 0; i < n; ++i) {
      const int id = Argmax(s.logits());
      if (id == s.eos() || id == s.bos()) break;
      out.push_back(id);
      if (i + 1 < n) {
        EXPECT_TRUE(s.Decode(id).ok());
      }
    }
    return out;
  }
  // SnapKV at `budget` entries per head.
  static std::unique_ptr<Conversation> Snap(int budget) {
    KvOptions kv;
    kv.policy = "snapkv";
    kv.budget_tokens = budget;
    return Make(kv);
  }
  // Attention Matching at `ratio` of the tokens seen.
  static std::unique_ptr<Conversation> Am(double ratio) {
    KvOptions kv;
    kv.policy = "am";
    kv.ratio = ratio;
    return Make(kv);
  }
  static std::unique_ptr<Conversation> Make(const KvOptions& kv) {
    SessionOptions so;
    so.kv = kv;
    auto c = Conversation::Create(engine(), so);
    EXPECT_TRUE(c.ok()) << c.error().message;
    return c.ok() ? std::move(c.value()) : nullptr;
  }
  // One turn: the user's message, a greedy answer of n tokens; returns it.
  static std::vector<int> Turn(Conversation& c, const std::string& user, int n, size_t* turn_tokens = nullptr) {
    const std::vector<ChatMessage> added{{"user", user}};
    auto t = c.TurnTokens(added);
    EXPECT_TRUE(t.ok());
    EXPECT_TRUE(c.BeginTurn(added, t.value()).ok());
    const size_t before = c.session().tokens().size();
    std::vector<int> a = Greedy(c.session(), n);
    c.EndTurn(engine().impl().tokenizer().Decode(a), a);
    if (turn_tokens) *turn_tokens = t.value().size() + (c.session().tokens().size() - before);
    return a;
  }
};

const char* const kTurns[] = {"The code word is heron. Remember it.", "Tell me about the river and the mill.",
                              "What was the code word?", "Say it once more, please."};

TEST_F(ConversationTest, FullCacheAnswersAsOneSessionFedTheTranscript) {
  KvOptions full;
  auto c = Make(full);
  ASSERT_TRUE(c);
  const io::Tokenizer& tok = engine().impl().tokenizer();
  // The transcript's tokens built here: the first turn's formatted prompt,
  // then each answer's every sampled token and the template's continuation.
  std::vector<int> transcript;
  for (const char* user : kTurns) {
    const std::vector<ChatMessage> added{{"user", user}};
    if (c->messages().empty()) {
      const ChatPrompt p = FormatChat(engine(), added);
      transcript = tok.Encode(p.text, !p.has_bos, p.parse_special);
    } else {
      auto cont = ContinuationText(ChatTemplate(engine()), c->messages(), added, tok.piece_text(tok.bos()),
                                   tok.piece_text(tok.eos()));
      ASSERT_TRUE(cont.ok());
      const std::vector<int> more = tok.Encode(cont.value(), false, false);
      transcript.insert(transcript.end(), more.begin(), more.end());
    }
    auto t = c->TurnTokens(added);
    ASSERT_TRUE(t.ok());
    ASSERT_TRUE(c->BeginTurn(added, t.value()).ok());
    // One session fed the whole transcript so far at once.
    auto one = Session::Create(engine(), SessionOptions{});
    ASSERT_TRUE(one.ok());
    ASSERT_TRUE(one.value()->Prefill(c->session().tokens()).ok());
    const std::vector<int> want = Greedy(*one.value(), 12);
    const std::vector<int> got = Greedy(c->session(), 12);
    EXPECT_EQ(got, want) << user;
    ASSERT_FALSE(got.empty());
    EXPECT_EQ(c->session().tokens().size() - got.size() + 1, transcript.size()) << user;
    EXPECT_TRUE(std::equal(transcript.begin(), transcript.end(), c->session().tokens().begin())) << user;
    transcript.insert(transcript.end(), got.begin(), got.end());
    c->EndTurn(engine().impl().tokenizer().Decode(got), got);
    // A length-limited answer's last token waits for the next turn.
    EXPECT_EQ(c->pending().size(), got.size() == 12 ? 1u : 0u);
  }
  EXPECT_EQ(c->turns(), 4);
  EXPECT_EQ(c->messages().size(), 8u);
}

TEST_F(ConversationTest, BudgetHoldsWhateverTheTurns) {
  auto c = Snap(32);
  ASSERT_TRUE(c);
  const auto& cfg = engine().impl().config();
  const int heads = cfg.n_layer * cfg.n_head_kv;
  const size_t row = c->session().impl().cache().head(0, 0).row_bytes();
  const size_t per_entry = 2 * row + sizeof(int32_t) + sizeof(float);
  for (int turn = 0; turn < 12; ++turn) {
    size_t turn_tokens = 0;
    Turn(*c, kTurns[turn % 4], 8, &turn_tokens);
    const auto& cache = c->session().impl().cache();
    for (int l = 0; l < cfg.n_layer; ++l)
      for (int h = 0; h < cfg.n_head_kv; ++h)
        EXPECT_LE(cache.head(l, h).size(), 32 + static_cast<int>(turn_tokens)) << "turn " << turn;
    // The turn's peak: budget + the turn's tokens per head, plus the
    // allocation's growth step (max(16, n/16) rows).
    const size_t n = 32 + turn_tokens;
    EXPECT_LE(c->session().peak_kv_bytes(), heads * (n + std::max<size_t>(16, n / 16)) * per_entry) << "turn " << turn;
  }
  // The full cache of the same tokens is far larger: the budget did bind.
  EXPECT_GT(c->session().position(), 3 * (32 + 40));
  EXPECT_LT(c->session().impl().cache().EntriesHeld(), static_cast<size_t>(heads) * 64);
}

TEST_F(ConversationTest, SavedConversationContinuesWhereItStopped) {
  auto a = Snap(48);
  ASSERT_TRUE(a);
  Turn(*a, kTurns[0], 12);
  Turn(*a, kTurns[1], 12);
  auto b = Conversation::Load(engine(), a->Bytes(), "saved", SessionOptions{});
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ(b.value()->messages().size(), 4u);
  EXPECT_EQ(b.value()->pending(), a->pending());
  EXPECT_EQ(b.value()->session().tokens(), a->session().tokens());
  EXPECT_EQ(Turn(*b.value(), kTurns[2], 12), Turn(*a, kTurns[2], 12));
  // Bytes that are not a conversation are refused with the name.
  auto plain = Session::Create(engine(), SessionOptions{});
  ASSERT_TRUE(plain.ok());
  ASSERT_TRUE(plain.value()->Prefill({engine().impl().tokenizer().bos()}).ok());
  auto bad = Conversation::Load(engine(), plain.value()->ContextBytes(), "ctx-1", SessionOptions{});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("ctx-1"), std::string::npos);
}

TEST_F(ConversationTest, KvzipRepeatsEachTurnOnly) {
  // KVzip's pass carries the kept entries' scores, so each turn's pass
  // repeats what came since the last compression (the last answer and the
  // turn), not the conversation: the counter ref-pass-tokens grows by
  // exactly that (the first turn: its prompt after the BOS). The shared
  // budget holds over every head after each turn's compression.
  KvOptions kv;
  kv.policy = "kvzip";
  kv.budget_tokens = 16;  // below the first turn's 21 tokens: every turn compresses
  auto c = Make(kv);
  ASSERT_TRUE(c);
  auto repeated = [&] {
    for (const auto& [k, v] : c->session().impl().compressor().counters())
      if (k == "ref-pass-tokens") return v;
    return int64_t{0};
  };
  const auto& cfg = engine().impl().config();
  const size_t heads = static_cast<size_t>(cfg.n_layer) * cfg.n_head_kv;
  size_t covered = 1;  // the BOS is never repeated
  for (int turn = 0; turn < 4; ++turn) {
    const int64_t before = repeated();
    const std::vector<ChatMessage> added{{"user", kTurns[turn]}};
    auto t = c->TurnTokens(added);
    ASSERT_TRUE(t.ok());
    ASSERT_TRUE(c->BeginTurn(added, t.value()).ok());  // prefilled and compressed
    const size_t fed = c->session().tokens().size();
    EXPECT_EQ(repeated() - before, static_cast<int64_t>(fed - covered)) << "turn " << turn;
    EXPECT_LE(c->session().impl().cache().EntriesHeld(), heads * 16) << "turn " << turn;
    covered = fed;
    std::vector<int> a = Greedy(c->session(), 6);
    c->EndTurn(engine().impl().tokenizer().Decode(a), a);
  }
  EXPECT_GT(c->session().tokens().size(), 4 * 16u);  // the budget did bind
}

// A head's entries before logical position `to`: positions, log-weights,
// keys and values as read back (the entries a later turn must not touch).
struct Entries {
  std::vector<int32_t> pos;
  std::vector<float> logw, kv;
  bool operator==(const Entries&) const = default;
};
Entries Before(const kv::HeadStore& h, size_t to) {
  Entries e;
  std::vector<float> row(static_cast<size_t>(h.head_dim()));
  for (int i = 0; i < h.size() && static_cast<size_t>(h.pos(i)) < to; ++i) {
    e.pos.push_back(h.pos(i));
    e.logw.push_back(h.logw(i));
    h.ReadKey(i, row.data());
    e.kv.insert(e.kv.end(), row.begin(), row.end());
    h.ReadValue(i, row.data());
    e.kv.insert(e.kv.end(), row.begin(), row.end());
  }
  return e;
}

int64_t Counter(const Conversation& c, const std::string& name) {
  for (const auto& [k, v] : c.session().impl().compressor().counters())
    if (k == name) return v;
  return 0;
}

TEST_F(ConversationTest, AmCompactsEachTurnOnceHoldingTheNewest) {
  // Attention Matching lags a turn: a turn's prompt is held whole while it
  // is answered; the next turn's pass repeats that prompt and its answer
  // (nothing else: the BOS never, the first turn nothing) and compacts them
  // to their share, ceil(r c) entries for the c tokens before the newest
  // turn in all (a rounding entry per turn at most above it); what an
  // earlier turn compacted is never touched again, bit for bit.
  auto c = Am(0.25);
  ASSERT_TRUE(c);
  const auto& cfg = engine().impl().config();
  std::vector<Entries> kept(static_cast<size_t>(cfg.n_layer) * cfg.n_head_kv);
  size_t prev_first = 0;
  for (int turn = 0; turn < 5; ++turn) {
    const int64_t r0 = Counter(*c, "ref-pass-tokens");
    const std::vector<ChatMessage> added{{"user", kTurns[turn % 4]}};
    auto t = c->TurnTokens(added);
    ASSERT_TRUE(t.ok());
    const size_t first = c->session().tokens().size();  // the turn's first token
    ASSERT_TRUE(c->BeginTurn(added, t.value()).ok());
    const size_t end = c->session().tokens().size();
    EXPECT_EQ(Counter(*c, "ref-pass-tokens") - r0, turn == 0 ? 0 : static_cast<int64_t>(first - std::max<size_t>(prev_first, 1)))
        << "turn " << turn;
    for (int l = 0; l < cfg.n_layer; ++l)
      for (int h = 0; h < cfg.n_head_kv; ++h) {
        const kv::HeadStore& hs = c->session().impl().cache().head(l, h);
        const Entries now = Before(hs, first);
        const int compacted = static_cast<int>(now.pos.size());
        ASSERT_EQ(static_cast<size_t>(hs.size() - compacted), end - first) << "turn " << turn;  // held whole
        for (int i = compacted; i < hs.size(); ++i) EXPECT_EQ(static_cast<size_t>(hs.pos(i)), first + (i - compacted));
        EXPECT_LE(compacted, static_cast<int>(std::ceil(0.25 * first)) + turn) << "turn " << turn;
        if (turn > 0) {
          EXPECT_GT(compacted, 0) << "turn " << turn;
        }
        Entries& was = kept[static_cast<size_t>(l) * cfg.n_head_kv + h];
        EXPECT_TRUE(Before(hs, prev_first) == was) << "layer " << l << " head " << h << " turn " << turn;
        was = now;
      }
    prev_first = first;
    std::vector<int> a = Greedy(c->session(), 6);
    c->EndTurn(engine().impl().tokenizer().Decode(a), a);
  }
}

TEST_F(ConversationTest, AmTurnsPrefilledInChunksHoldTheirLastChunk) {
  // With --prefill-chunk a turn's chunks but the last are compacted as they
  // stream in (the first with what the last turn held); only the last chunk
  // is held whole while the turn is answered.
  KvOptions kv;
  kv.policy = "am";
  kv.ratio = 0.25;
  kv.prefill_chunk = 8;
  auto c = Make(kv);
  ASSERT_TRUE(c);
  const auto& cfg = engine().impl().config();
  for (int turn = 0; turn < 4; ++turn) {
    const std::vector<ChatMessage> added{{"user", kTurns[turn]}};
    auto t = c->TurnTokens(added);
    ASSERT_TRUE(t.ok());
    const size_t first = c->session().tokens().size();
    ASSERT_TRUE(c->BeginTurn(added, t.value()).ok());
    const size_t end = c->session().tokens().size();
    const size_t held_from = first + (t.value().size() - 1) / 8 * 8;  // the last chunk's first token
    for (int l = 0; l < cfg.n_layer; ++l)
      for (int h = 0; h < cfg.n_head_kv; ++h) {
        const kv::HeadStore& hs = c->session().impl().cache().head(l, h);
        const int before = static_cast<int>(Before(hs, held_from).pos.size());
        ASSERT_EQ(static_cast<size_t>(hs.size() - before), end - held_from) << "turn " << turn;
        EXPECT_LE(before, static_cast<int>(std::ceil(0.25 * held_from)) + 8 * (turn + 1)) << "turn " << turn;
      }
    std::vector<int> a = Greedy(c->session(), 6);
    c->EndTurn(engine().impl().tokenizer().Decode(a), a);
  }
}

TEST_F(ConversationTest, SavedAmConversationContinuesAsInMemory) {
  // Where the held turn begins is saved with the conversation: a loaded one
  // compacts the same entries at its next turn as the one kept in memory,
  // and answers the same.
  auto a = Am(0.25);
  ASSERT_TRUE(a);
  Turn(*a, kTurns[0], 12);
  Turn(*a, kTurns[1], 12);
  auto b = Conversation::Load(engine(), a->Bytes(), "saved", SessionOptions{});
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ(b.value()->session().compressed_to(), a->session().compressed_to());
  EXPECT_GT(a->session().compressed_to(), 0u);
  EXPECT_EQ(Turn(*b.value(), kTurns[2], 12), Turn(*a, kTurns[2], 12));
  const auto& cfg = engine().impl().config();
  for (int l = 0; l < cfg.n_layer; ++l)
    for (int h = 0; h < cfg.n_head_kv; ++h)
      EXPECT_EQ(b.value()->session().impl().cache().head(l, h).positions(),
                a->session().impl().cache().head(l, h).positions())
          << "layer " << l << " head " << h;
}

TEST_F(ConversationTest, RefusesPoliciesThatRepeatTheWholeContext) {
  SessionOptions so;
  so.kv.policy = "kvzip-am";
  so.kv.ratio = 0.5;
  auto c = Conversation::Create(engine(), so);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("reference pass"), std::string::npos) << c.error().message;
  // am compacts each turn once: a ratio, never a token budget.
  so.kv.policy = "am";
  EXPECT_TRUE(Conversation::Create(engine(), so).ok());
  so.kv.budget_tokens = 64;
  auto b = Conversation::Create(engine(), so);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("--kv-ratio"), std::string::npos) << b.error().message;
  auto f = Make(KvOptions{});
  ASSERT_TRUE(f);
  EXPECT_FALSE(f->TurnTokens({}).ok());
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim
