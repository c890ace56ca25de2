// Re-basing a session's RoPE positions (kv/rope_map.h, Session::MakeRoom):
// the map's arithmetic by hand, the key rotation against RoPE applied at the
// new position, the next token unchanged when every held entry keeps its
// distance, and a conversation carried past the context length, saved and
// loaded on the way.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <vector>

#include "engine/engine_impl.h"
#include "io/tokenizer.h"
#include "kv/cache.h"
#include "kv/rope_map.h"
#include "kvtrim/conversation.h"
#include "model/rope.h"
#include "test_util.h"

namespace kvtrim {
namespace {

TEST(RopeMap, SquashKeepsTheRecentDistancesAndScalesTheRest) {
  const kv::RopeMap id;
  EXPECT_EQ(id.At(37), 37);
  EXPECT_EQ(id.shift(), 0);
  // 100 tokens: the newest 20 positions kept, positions 0..80 into 0..10.
  auto m = id.Squashed(100, 20, 10);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->shift(), 70);
  EXPECT_DOUBLE_EQ(m->At(0), 0);
  EXPECT_DOUBLE_EQ(m->At(40), 5);
  EXPECT_DOUBLE_EQ(m->At(80), 10);
  EXPECT_DOUBLE_EQ(m->At(99), 29);
  EXPECT_DOUBLE_EQ(m->At(100), 30);  // the next token: 100 - shift
  // 50 more tokens (RoPE length 80), then again: the newest 20 kept, the
  // older 60 positions into 0..6; a token's position is the two squashes
  // composed.
  auto m2 = m->Squashed(150, 20, 6);
  ASSERT_TRUE(m2.ok()) << m2.error().message;
  EXPECT_EQ(m2->shift(), 150 - 26);
  auto s1 = [](double p) { return p <= 80 ? p / 8 : p - 70; };
  auto s2 = [](double y) { return y <= 60 ? y / 10 : y - 54; };
  for (double p : {0.0, 13.0, 40.0, 80.0, 99.0, 120.0, 129.0, 130.0, 131.0, 149.0, 150.0})
    EXPECT_NEAR(m2->At(p), s2(s1(p)), 1e-12) << p;
  // Nothing to squash into: refused.
  EXPECT_FALSE(id.Squashed(100, 60, 40).ok());
  EXPECT_FALSE(id.Squashed(100, 0, 10).ok());
}

TEST(RopeMap, PointsReadBackAreChecked) {
  auto m = kv::RopeMap().Squashed(100, 20, 10);
  ASSERT_TRUE(m.ok());
  auto back = kv::RopeMap::FromPoints(m->points(), 100);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->shift(), 70);
  EXPECT_DOUBLE_EQ(back->At(40), 5);
  EXPECT_FALSE(kv::RopeMap::FromPoints({{1, 0}, {80, 10}}, 100).ok());           // not from (0, 0)
  EXPECT_FALSE(kv::RopeMap::FromPoints({{0, 0}, {80, 10}, {70, 12}}, 100).ok()); // x decreasing
  EXPECT_FALSE(kv::RopeMap::FromPoints({{0, 0}, {80, 10.5}}, 100).ok());         // a fractional shift
  EXPECT_FALSE(kv::RopeMap::FromPoints({{0, 0}, {180, 10}}, 100).ok());          // past the length
  EXPECT_TRUE(kv::RopeMap::FromPoints({}, 100).ok());                            // identity
}

TEST(RopeMap, TurningAKeyEqualsRotatingItAtTheNewPosition) {
  // Rope::Turn(Apply(x, p), q - p) against Apply(x, q): both layouts, a
  // partial rotary, YaRN (its scale on cos/sin is kept by the turn).
  std::mt19937 rng(5);
  std::normal_distribution<float> g;
  for (auto mode : {kernels::RopeMode::kNormal, kernels::RopeMode::kNeox})
    for (bool yarn : {false, true}) {
      model::ModelConfig c;
      c.head_dim = 32;
      c.rope_dims = 24;
      c.rope_mode = mode;
      c.rope_base = 10000.f;
      if (yarn) c.rope_scaling = "yarn", c.rope_freq_scale = 0.125f, c.rope_orig_ctx = 1024;
      const model::Rope rope(c, {});
      for (auto [p, q] : {std::pair{700, 93}, std::pair{5, 4000}, std::pair{8191, 0}}) {
        std::vector<float> x(64), want(64);
        for (float& v : x) v = g(rng);
        want = x;
        rope.Apply(x.data(), 2, 32, p);
        rope.Turn(x.data(), 2, 32, static_cast<double>(q - p));
        rope.Apply(want.data(), 2, 32, q);
        for (int i = 0; i < 64; ++i) EXPECT_NEAR(x[i], want[i], 2e-5) << p << " -> " << q << " " << i;
      }
    }
}

class RebaseTest : public test::DefaultModelTest {
 protected:
  // The largest difference between two sessions' logits, and b's largest logit.
  struct Gap {
    double worst = 0, top = 0;
  };
  static Gap LogitGap(const Session& a, const Session& b) {
    Gap g;
    for (size_t i = 0; i < a.logits().size(); ++i) {
      g.worst = std::max(g.worst, static_cast<double>(std::fabs(a.logits()[i] - b.logits()[i])));
      g.top = std::max(g.top, static_cast<double>(std::fabs(b.logits()[i])));
    }
    return g;
  }
  static std::vector<int> Text(size_t n) {
    std::vector<int> t = engine().impl().tokenizer().Encode(
        test::ReadFile(test::SharedPath("data/frankenstein.txt")).substr(2000, 4000), true);
    t.resize(n);
    return t;
  }
  static std::unique_ptr<Session> Window(int ctx, const std::string& quant = "f32") {
    SessionOptions so;
    so.ctx = ctx;
    so.kv.quant = quant;
    so.kv.policy = "window";
    so.kv.budget_tokens = 40;
    so.kv.params["sinks"] = 0;
    auto s = Session::Create(engine(), so);
    EXPECT_TRUE(s.ok()) << s.error().message;
    return s.ok() ? std::move(s.value()) : nullptr;
  }
};

TEST_F(RebaseTest, HeldEntriesThatKeepTheirDistancesGiveTheSameNextToken) {
  // 200 tokens, the newest 40 held, no sinks; 100 more do not fit 256: the
  // re-base keeps the newest 64 positions (every entry held) and moves them
  // down by 72. RoPE sees only distances: the next token's logits stay.
  auto a = Window(256), b = Window(256);
  ASSERT_TRUE(a && b);
  const std::vector<int> t = Text(201);
  const std::vector<int> head(t.begin(), t.end() - 1);
  for (Session* s : {a.get(), b.get()}) {
    ASSERT_TRUE(s->Prefill(head).ok());
    ASSERT_TRUE(s->Compress().ok());
  }
  ASSERT_EQ(a->impl().cache().head(0, 0).size(), 40);
  ASSERT_TRUE(a->MakeRoom(100).ok());
  EXPECT_EQ(a->position(), 200);
  EXPECT_EQ(a->rope_position(), 128);
  EXPECT_EQ(b->rope_position(), 200);
  ASSERT_TRUE(a->Decode(t.back()).ok());
  ASSERT_TRUE(b->Decode(t.back()).ok());
  const Gap g = LogitGap(*a, *b);
  EXPECT_LT(g.worst, 1e-4 * g.top);
  // Room already there: nothing moves.
  ASSERT_TRUE(a->MakeRoom(10).ok());
  EXPECT_EQ(a->rope_position(), 129);
  // A request the context cannot hold at all.
  EXPECT_FALSE(a->MakeRoom(255).ok());
}

TEST_F(RebaseTest, QuantizedRotatedRowsAreTurnedInTheModelsBasis) {
  // q8_0 and q4_0 rows are stored Hadamard-rotated (--kv-rotate auto): the
  // re-base reads each key back in the model's basis, turns it and stores it
  // again. The next token stays within the one re-quantization's error of
  // the cache not re-based: 0.5% (q8_0) and 6% (q4_0) of the largest logit
  // measured, where keys left unturned move it by about 80%.
  for (const char* quant : {"q8_0", "q4_0"}) {
    auto a = Window(256, quant), b = Window(256, quant);
    ASSERT_TRUE(a && b);
    ASSERT_TRUE(a->impl().cache().rotated()) << quant;
    const std::vector<int> t = Text(201);
    const std::vector<int> head(t.begin(), t.end() - 1);
    for (Session* s : {a.get(), b.get()}) {
      ASSERT_TRUE(s->Prefill(head).ok());
      ASSERT_TRUE(s->Compress().ok());
    }
    ASSERT_TRUE(a->MakeRoom(100).ok());
    ASSERT_TRUE(a->Decode(t.back()).ok());
    ASSERT_TRUE(b->Decode(t.back()).ok());
    const Gap g = LogitGap(*a, *b);
    EXPECT_LT(g.worst, (std::string(quant) == "q8_0" ? 2e-2 : 1e-1) * g.top) << quant;
  }
}

TEST_F(RebaseTest, SquashedEntriesMoveTheNextToken) {
  // The same re-base with the whole cache held: the older entries' distances
  // shrink, so the next token's logits do move (the test above can fail).
  SessionOptions so;
  so.ctx = 256;
  auto a = Session::Create(engine(), so), b = Session::Create(engine(), so);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::vector<int> t = Text(201);
  const std::vector<int> head(t.begin(), t.end() - 1);
  ASSERT_TRUE(a.value()->Prefill(head).ok());
  ASSERT_TRUE(b.value()->Prefill(head).ok());
  ASSERT_TRUE(a.value()->MakeRoom(100).ok());
  ASSERT_TRUE(a.value()->Decode(t.back()).ok());
  ASSERT_TRUE(b.value()->Decode(t.back()).ok());
  EXPECT_GT(LogitGap(*a.value(), *b.value()).worst, 1e-2);
}

TEST_F(RebaseTest, ConversationGoesPastTheContextLengthAndReloads) {
  SessionOptions so;
  so.ctx = 192;
  so.kv.policy = "snapkv";
  so.kv.budget_tokens = 32;
  auto c = Conversation::Create(engine(), so);
  ASSERT_TRUE(c.ok()) << c.error().message;
  const char* users[] = {"The code word is heron. Remember it.", "Tell me about the river and the mill.",
                         "What was the code word?"};
  auto turn = [&](Conversation& conv, int i) {
    const std::vector<ChatMessage> added{{"user", users[i % 3]}};
    auto tok = conv.TurnTokens(added);
    EXPECT_TRUE(tok.ok());
    const Status st = conv.BeginTurn(added, tok.value(), 8);
    EXPECT_TRUE(st.ok()) << "turn " << i << ": " << st.message();
    EXPECT_LE(conv.session().rope_position() + 8, 192) << "turn " << i;
    std::vector<int> a;
    for (int k = 0; k < 8; ++k) {
      const auto& l = conv.session().logits();
      a.push_back(static_cast<int>(std::max_element(l.begin(), l.end()) - l.begin()));
      if (k + 1 < 8) {
        EXPECT_TRUE(conv.session().Decode(a.back()).ok());
      }
    }
    conv.EndTurn(engine().impl().tokenizer().Decode(a), a);
    return a;
  };
  for (int i = 0; i < 20; ++i) turn(*c.value(), i);
  const Session& s = c.value()->session();
  EXPECT_GT(s.position(), 2 * 192);  // well past the context length
  EXPECT_LT(s.rope_position(), 192);
  EXPECT_FALSE(s.impl().cache().rope_map().identity());
  // Saved and loaded, it goes on as the one in memory.
  auto b = Conversation::Load(engine(), c.value()->Bytes(), "saved", so);
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ(b.value()->session().rope_position(), s.rope_position());
  for (int i = 20; i < 24; ++i) EXPECT_EQ(turn(*b.value(), i), turn(*c.value(), i)) << "turn " << i;
}

}  // namespace
}  // namespace kvtrim
