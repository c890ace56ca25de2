// Fidelity metrics on closed-form cases, and sweeps on the needle model:
// full vs full (and any policy at ratio 1.0) gives KL 0 and NLL ratio 1; the
// full-cache niah accuracy matches MODELS.md.
// GCC 12 at -O1 (the sanitizer builds) reports a false -Wmaybe-uninitialized
// inside libstdc++'s std::regex (std::function moved in _NFA); silenced here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <gtest/gtest.h>

#include <cmath>
#include <regex>

#include "engine/engine_impl.h"
#include "eval/metrics.h"
#include "eval/scoring.h"
#include "kvtrim/eval_sweep.h"
#include "kvtrim/eval_tasks.h"
#include "io/tokenizer.h"
#include "kv/policy.h"
#include "model/config.h"
#include "test_util.h"

namespace kvtrim::eval {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

TEST(EvalMetrics, ClosedForms) {
  const float p[2] = {0.f, std::log(3.f)};  // softmax: 0.25, 0.75
  const float q[2] = {1.f, 1.f};            // 0.5, 0.5
  EXPECT_NEAR(KlDivergence(p, q, 2), 0.25 * std::log(0.5) + 0.75 * std::log(1.5), 1e-7);
  EXPECT_EQ(KlDivergence(p, p, 2), 0.0);
  const float u[4] = {0, 0, 0, 0};
  EXPECT_NEAR(Nll(u, 4, 2), std::log(4.0), 1e-12);
  EXPECT_NEAR(Nll(p, 2, 1), -std::log(0.75), 1e-7);
  MeanSe s = Summarize({1, 2, 3, 4});
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_NEAR(s.se, std::sqrt(5.0 / 3.0) / 2.0, 1e-12);
  EXPECT_EQ(Summarize({NAN, 1.0}).n, 1);
}

SweepOptions Small() {
  SweepOptions o;
  o.methods = {"full", "window", "h2o", "snapkv"};
  o.ratios = {1.0};
  o.tasks = {TaskKind::kNiah, TaskKind::kPasskey};
  o.samples = 2;
  o.context_tokens = 300;
  o.fidelity_continuation = 64;
  o.haystack = test::SharedPath("data/frankenstein.txt");
  return o;
}

TEST(EvalSweep, RatioOneIsExactlyTheReference) {
  // Both fidelity protocols and the needle tasks give KL 0 at ratio 1 for
  // every method (razor too: an explicit ratio 1 keeps everything, its
  // compress factor applies only when no ratio is given); in fidelity-decode
  // the prefill-time policies (snapkv, razor without --razor-fold) are marked
  // n/a, not measured.
  auto e = test::LoadEngine("needle-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  for (bool aware : {false, true}) {
    SweepOptions o = Small();
    o.methods = {"full", "window", "h2o", "snapkv", "razor", "kvslimmer", "merge-mean"};
    o.query_aware = aware;
    auto rep = RunSweep(*e, o);
    ASSERT_TRUE(rep.ok()) << rep.error().message;
    ASSERT_EQ(rep->cells.size(), 4u * 7u);  // (niah, passkey, fidelity, fidelity-decode) x 7 methods at ratio 1
    for (const Cell& c : rep->cells) {
      if (c.task == "fidelity-decode" && (c.method == "snapkv" || c.method == "razor")) {
        EXPECT_EQ(c.n, 0);
        EXPECT_NE(c.note.find("n/a"), std::string::npos);
        continue;
      }
      EXPECT_EQ(c.note, "");
      EXPECT_EQ(c.n, 2);
      EXPECT_EQ(c.kl, 0.0) << c.task << " " << c.method;
      EXPECT_EQ(c.nll_ratio, 1.0) << c.task << " " << c.method;
      EXPECT_EQ(c.kv_bytes, c.kv_bytes_full) << c.task << " " << c.method;
    }
  }
}

TEST(EvalSweep, MultiTurnRunsEveryMethodAsAConversation) {
  // niah-multiturn: each method runs the conversation compressed turn by
  // turn (its KV at the question about r of the full cache's), the full
  // cache at ratio 1 exactly as a conversation with no policy; a method that
  // repeats the whole context (kvzip-am) is a cell saying why it is not run
  // (kvzip repeats each turn only, am each turn once, a turn late: they run;
  // am holds the question's turn whole, above r), and a ratio razor cannot
  // reach one saying so.
  auto e = test::LoadEngine("needle-v1-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  SweepOptions o = Small();
  o.methods = {"full", "snapkv", "keydiff", "kvzip", "am", "kvzip-am", "razor"};
  o.ratios = {0.5};
  o.tasks = {TaskKind::kMultiTurn};
  o.fidelity = o.fidelity_decode = false;
  o.context_tokens = 600;
  o.task.turns = 4;
  auto rep = RunSweep(*e, o);
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  ASSERT_EQ(rep->cells.size(), 7u);
  double full_bytes = 0;
  for (const Cell& c : rep->cells) {
    EXPECT_EQ(c.task, "niah-multiturn");
    if (c.method == "full") full_bytes = c.kv_bytes;
  }
  ASSERT_GT(full_bytes, 0);
  for (const Cell& c : rep->cells) {
    if (c.method == "am") {
      EXPECT_EQ(c.n, 2) << c.note;
      EXPECT_GT(c.kv_bytes / full_bytes, 0.5);  // r of the turns before the question, and the question's whole
      EXPECT_LT(c.kv_bytes / full_bytes, 0.8);
    } else if (c.method == "kvzip-am") {
      EXPECT_EQ(c.n, 0);
      EXPECT_NE(c.note.find("reference pass"), std::string::npos) << c.note;
    } else if (c.method == "razor") {
      EXPECT_EQ(c.n, 0);
      EXPECT_EQ(c.note.rfind("unreachable:", 0), 0u) << c.note;
    } else if (c.method != "full") {
      EXPECT_EQ(c.n, 2) << c.method << " " << c.note;
      EXPECT_NEAR(c.kv_bytes / full_bytes, 0.5, 0.05) << c.method;
      EXPECT_EQ(c.kv_bytes_full, full_bytes);
    }
  }
}

TEST(EvalSweep, MultiTurnPastItsSessionsContextIsRebased) {
  // --conversation-ctx: the conversation's sessions read at 256 positions,
  // its 600 tokens re-based on the way (Session::MakeRoom); one that cannot
  // hold a single turn is the sweep's error, naming the context length.
  auto e = test::LoadEngine("needle-v1-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  SweepOptions o = Small();
  o.methods = {"full", "snapkv"};
  o.ratios = {0.5};
  o.tasks = {TaskKind::kMultiTurn};
  o.fidelity = o.fidelity_decode = false;
  o.context_tokens = 600;
  o.task.turns = 6;
  o.task.conversation_ctx = 256;
  auto rep = RunSweep(*e, o);
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  ASSERT_EQ(rep->cells.size(), 2u);
  for (const Cell& c : rep->cells) {
    EXPECT_EQ(c.n, 2) << c.method << " " << c.note;
    // The answers are decoded past the context length too (a loop that
    // stopped at position() >= ctx repeated the first token: 0 right).
    if (c.method == "full") {
      EXPECT_GT(c.accuracy, 0) << c.note;
    }
  }
  o.task.conversation_ctx = 48;
  auto small = RunSweep(*e, o);
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.error().message.find("context length"), std::string::npos) << small.error().message;
}

TEST(EvalSweep, UnreachableRatioIsACellNotAnError) {
  // razor cannot go below f_ret + (1 - f_ret)(S + S0 + 1) / N: the sweep
  // reports those cells as unreachable, with the reason, and runs the rest.
  auto e = test::LoadEngine("needle-v1-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  SweepOptions o = Small();
  o.methods = {"razor", "h2o"};
  o.ratios = {0.1};
  o.tasks = {TaskKind::kNiah};
  o.fidelity_decode = false;
  o.samples = 1;
  auto rep = RunSweep(*e, o);
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  int unreachable = 0;
  for (const Cell& c : rep->cells) {
    if (c.method != "razor") {
      EXPECT_EQ(c.note, "");
      EXPECT_EQ(c.n, 1);
      continue;
    }
    EXPECT_EQ(c.n, 0);
    EXPECT_EQ(c.note.rfind("unreachable: razor: retention ratio 0.1 is below", 0), 0u) << c.note;
    ++unreachable;
  }
  EXPECT_EQ(unreachable, 2);  // niah and fidelity
}

TEST(EvalSweep, FidelityProtocolsAppendOrHoldTheBudget) {
  // fidelity: the prefix is compressed once and the continuation appended
  // uncompressed, so a decode-time policy's cache grows by exactly the T - 1
  // teacher-forced tokens in every head. fidelity-decode: the budget
  // ceil(r * N) holds after every decoded token.
  auto e = test::LoadEngine("needle-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  SweepOptions o = Small();
  o.methods = {"h2o", "window"};
  o.ratios = {0.25};
  o.tasks = {};
  auto rep = RunSweep(*e, o);
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  const long long heads = e->impl().config().n_layer * e->impl().config().n_head_kv;
  const int T = o.fidelity_continuation;
  int checked = 0;
  for (const SampleRecord& r : rep->samples) {
    if (r.method == "full") continue;
    const long long n_end = o.context_tokens - 1;  // logical length after the forced tokens
    if (r.task == "fidelity") {
      EXPECT_EQ(r.entries_end - r.entries_compressed, (T - 1) * heads) << r.method;
    } else {
      ASSERT_EQ(r.task, "fidelity-decode");
      EXPECT_LE(r.entries_end, heads * static_cast<long long>(std::ceil(0.25 * n_end))) << r.method;
      EXPECT_LT(r.entries_end, r.entries_compressed + (T - 1) * heads) << r.method;
    }
    EXPECT_GT(r.kl, 0.0);
    ++checked;
  }
  EXPECT_EQ(checked, 2 * 2 * 2);  // 2 protocols x 2 methods x 2 samples
}

TEST(EvalSweep, CompressionCostsFidelityAndSavesBytes) {
  auto e = test::LoadEngine("needle-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  SweepOptions o = Small();
  o.ratios = {0.25};
  o.tasks = {};
  auto rep = RunSweep(*e, o);
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  for (const Cell& c : rep->cells) {
    if (c.method == "full" || !c.note.empty()) continue;
    EXPECT_GT(c.kl, 1e-4) << c.method;
    EXPECT_LT(c.kv_bytes, 0.5 * c.kv_bytes_full) << c.method;
    EXPECT_TRUE(std::isnan(c.accuracy));
  }
}

TEST(EvalSweep, FullCacheNiahAccuracyMatchesModelsMd) {
  // MODELS.md: needle v0, 24 single-needle samples at 1024 tokens, frankenstein,
  // query-agnostic: 0/24 (numpy reference). Within sampling error we accept at
  // most 2/24. The model still answers in the trained format (a 7-digit
  // number and a full stop), which shows the prompt follows the template.
  auto e = test::LoadEngine("needle-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  const auto& ref = test::Goldens();
  ASSERT_EQ(ref["niah_full_accuracy"].get<double>(), 0.0);
  SweepOptions o;
  o.methods = {"full"};
  o.tasks = {TaskKind::kNiah};
  o.fidelity = false;
  o.fidelity_decode = false;
  o.samples = 24;
  o.haystack = test::SharedPath("data/frankenstein.txt");
  auto rep = RunSweep(*e, o);
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  ASSERT_EQ(rep->cells.size(), 1u);
  EXPECT_EQ(rep->cells[0].n, 24);
  EXPECT_LE(rep->cells[0].accuracy, 2.0 / 24);
  EXPECT_EQ(rep->meta.context_tokens, 1024 - 48);

  // Answer format on prompts of the same template at 256 tokens (at 992 the
  // v0 model's format degrades: it was seen answering "20000000000").
  auto hay = Haystack::Load(o.haystack);
  ASSERT_TRUE(hay.ok());
  TaskOptions to;
  to.context_tokens = 256;
  to.seed = 1;
  int formatted = 0;
  const std::regex seven(R"(^\s*:?\s*\d{7}\.)");
  for (int i = 0; i < 24; i += 3) {
    auto ts = MakeSample(*e, hay.value(), TaskKind::kNiah, to, i, 24);
    ASSERT_TRUE(ts.ok());
    auto s = Session::Create(*e, {});
    std::vector<int> prompt = ts->context;
    prompt.insert(prompt.end(), ts->question.begin(), ts->question.end());
    ASSERT_TRUE(s.value()->Prefill(prompt).ok());
    std::vector<int> out;
    for (int k = 0; k < 10; ++k) {
      const auto& lg = s.value()->logits();
      out.push_back(static_cast<int>(std::max_element(lg.begin(), lg.end()) - lg.begin()));
      ASSERT_TRUE(s.value()->Decode(out.back()).ok());
    }
    std::string text = e->impl().tokenizer().Decode(out);
    formatted += std::regex_search(text, seven);
  }
  EXPECT_GE(formatted, 6) << "the model should answer with a 7-digit number and a full stop";
}

TEST(EvalSweep, NeedleV1RetrievesWithTheFullCache) {
  // MODELS.md: needle v1 at the full context on frankenstein: niah 1.00,
  // passkey 1.00 (n = 32). Eight samples each here; at most one miss.
  auto e = test::LoadEngine("needle-v1-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  SweepOptions o;
  o.methods = {"full"};
  o.tasks = {TaskKind::kNiah, TaskKind::kPasskey};
  o.fidelity = o.fidelity_decode = false;
  o.samples = 8;
  o.seed = 23;
  o.haystack = test::SharedPath("data/frankenstein.txt");
  auto rep = RunSweep(*e, o);
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  ASSERT_EQ(rep->cells.size(), 2u);
  for (const Cell& c : rep->cells) EXPECT_GE(c.accuracy, 7.0 / 8) << c.task;
}

TEST(EvalSweep, SameSweepTwiceGivesIdenticalNumbers) {
  auto e = test::LoadEngine("needle-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  SweepOptions o = Small();
  o.methods = {"random", "h2o", "snapkv"};
  o.ratios = {0.5, 0.2};
  auto a = RunSweep(*e, o), b = RunSweep(*e, o);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->cells.size(), b->cells.size());
  for (size_t i = 0; i < a->cells.size(); ++i) {
    const Cell &x = a->cells[i], &y = b->cells[i];
    EXPECT_EQ(x.note, y.note);
    if (!x.note.empty()) continue;  // not measured (n/a)
    EXPECT_EQ(x.kl, y.kl);
    EXPECT_EQ(x.nll_ratio, y.nll_ratio);
    EXPECT_EQ(x.kv_bytes, y.kv_bytes);
    if (!std::isnan(x.accuracy)) {
      EXPECT_EQ(x.accuracy, y.accuracy);
    }
  }
}

TEST(EvalSweep, ClearErrors) {
  auto e = test::LoadEngine("needle-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  SweepOptions o = Small();
  o.methods = {"nope"};
  EXPECT_NE(RunSweep(*e, o).error().message.find("unknown KV policy"), std::string::npos);
  o = Small();
  o.ratios = {0};
  EXPECT_NE(RunSweep(*e, o).error().message.find("outside (0, 1]"), std::string::npos);
  o = Small();
  o.context_tokens = 5000;
  EXPECT_NE(RunSweep(*e, o).error().message.find("exceeds"), std::string::npos);
  o = Small();
  o.haystack = "/nonexistent.txt";
  EXPECT_FALSE(RunSweep(*e, o).ok());
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::eval

namespace kvtrim::eval {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

TEST(EvalSweep, StreamedContextIsCompressedWhileDecoded) {
  // --stream-context: the context is decoded token by token under the budget.
  // At ratio 1 a decode-time policy equals the (also streamed) reference
  // exactly; at 0.25 its cache is a quarter of full after the context;
  // prefill-time policies are n/a.
  auto e = test::LoadEngine("needle-v1-3.7M-f32.gguf");
  ASSERT_TRUE(e);
  SweepOptions o = Small();
  o.methods = {"h2o", "snapkv"};
  o.ratios = {1.0, 0.25};
  o.tasks = {TaskKind::kPasskey};
  o.fidelity = o.fidelity_decode = false;
  o.stream_context = true;
  auto rep = RunSweep(*e, o);
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  ASSERT_EQ(rep->cells.size(), 5u);
  for (const Cell& c : rep->cells) {
    if (c.method == "snapkv") {
      EXPECT_NE(c.note.find("n/a"), std::string::npos);
      continue;
    }
    if (c.ratio == 1.0) {
      EXPECT_EQ(c.kl, 0.0) << c.method;
      EXPECT_EQ(c.kv_bytes, c.kv_bytes_full) << c.method;
    } else {
      EXPECT_LT(c.kv_bytes, 0.3 * c.kv_bytes_full);
      EXPECT_GT(c.kv_bytes, 0.2 * c.kv_bytes_full);
    }
  }
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::eval
