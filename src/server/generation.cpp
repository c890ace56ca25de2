#include "server/generation.h"

#include "engine/engine_impl.h"

#include <algorithm>
#include <chrono>

#include "io/tokenizer.h"
#include "kv/cache.h"

namespace kvtrim::server {

namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

// Bytes at the end of `s` that start a UTF-8 character not yet complete.
size_t IncompleteUtf8Tail(const std::string& s, size_t from) {
  for (size_t back = 1; back <= 4 && back <= s.size() - from; ++back) {
    const unsigned char c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: look further back
    const size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return len > back ? back : 0;
  }
  return 0;
}

}  // namespace

bool StopText::Add(const std::string& piece) {
  if (stopped_) return true;
  text_ += piece;
  size_t max_len = 0;
  for (const auto& s : stops_) max_len = std::max(max_len, s.size());
  const size_t from = sent_ > max_len ? sent_ - max_len : 0;
  size_t cut = std::string::npos;
  for (const auto& s : stops_) {
    const size_t at = text_.find(s, from);
    if (at < cut) cut = at, word_ = s;
  }
  if (cut != std::string::npos) {
    text_.resize(cut);
    stopped_ = true;
  }
  return stopped_;
}

std::string StopText::TakeReady(bool final) {
  size_t end = text_.size();
  if (!final && !stopped_) {
    size_t hold = 0;  // the longest tail that begins some stop string
    for (const auto& s : stops_)
      for (size_t k = std::min(s.size() - 1, end - sent_); k > hold; --k)
        if (text_.compare(end - k, k, s, 0, k) == 0) {
          hold = k;
          break;
        }
    end -= hold;
    end -= IncompleteUtf8Tail(text_.substr(0, end), sent_);
  }
  std::string out = text_.substr(sent_, end - sent_);
  sent_ = end;
  return out;
}

Status PrefillPrompt(Session& s, const std::vector<int>& prompt, bool compress, const GenerationHooks& hooks,
                     Generation* g) {
  g->prompt_tokens = static_cast<int>(prompt.size());
  const auto t0 = Clock::now();
  if (hooks.prefill) {
    KVTRIM_RETURN_IF_ERROR(hooks.prefill());
  } else {
    if (!prompt.empty()) KVTRIM_RETURN_IF_ERROR(s.Prefill(prompt));
    if (compress) KVTRIM_RETURN_IF_ERROR(s.Compress());
  }
  g->prefill_ms = Ms(t0, Clock::now());
  if (hooks.on_prefilled) hooks.on_prefilled(s);
  if (hooks.on_step) hooks.on_step(s);
  return {};
}

Status SampleAnswer(Session& s, const io::Tokenizer& tok, int prev, const CompletionRequest& r,
                    const GenerationHooks& hooks, Generation* g) {
  const auto t1 = Clock::now();
  // The loop of Generate (src/engine/generate.cpp): n sampled, n - 1 fed back.
  Sampler sampler(r.sampling);
  AcceptHistory(s, sampler);
  StopText text(r.stop);
  const int bos = s.bos(), eos = s.eos();
  bool client_gone = false;
  for (int i = 0; i < r.max_tokens; ++i) {
    if (hooks.alive && !hooks.alive()) {
      client_gone = true;
      break;
    }
    const int id = sampler.Sample(s.logits());
    sampler.Accept(id);
    if (!r.sampling.ignore_eos && (id == eos || id == bos)) {
      g->finish_reason = "stop";
      break;
    }
    g->tokens.push_back(id);
    const bool stopped = text.Add(tok.Piece(prev, id));
    prev = id;
    if (stopped) g->finish_reason = "stop", g->stopped_by_word = true;
    if (hooks.on_text) {
      const std::string ready = text.TakeReady(stopped);
      if (!ready.empty() && !hooks.on_text(ready)) client_gone = true;
    }
    if (stopped || client_gone || i + 1 == r.max_tokens) break;
    KVTRIM_RETURN_IF_ERROR(s.Decode(id));
    if (hooks.on_step) hooks.on_step(s);
  }
  if (hooks.on_text && !client_gone) {
    const std::string rest = text.TakeReady(true);
    if (!rest.empty()) hooks.on_text(rest);
  }
  if (client_gone) g->finish_reason = "abandoned";
  g->decode_ms = Ms(t1, Clock::now());
  g->text = text.text();
  g->stop_word = text.word();
  g->tokens_held = static_cast<int>(s.tokens().size());
  g->completion_tokens = static_cast<int>(g->tokens.size());
  g->kv_bytes = s.impl().cache().BytesUsed();
  g->kv_bytes_full = s.impl().cache().BytesFull();
  g->kv_entries = s.impl().cache().EntriesHeld();
  g->kv_bytes_peak = s.peak_kv_bytes();
  return {};
}

Expected<Generation> RunGeneration(Session& s, const io::Tokenizer& tok, const std::vector<int>& prompt, bool compress,
                                   int prev, const CompletionRequest& r, const GenerationHooks& hooks) {
  Generation g;
  KVTRIM_RETURN_IF_ERROR(PrefillPrompt(s, prompt, compress, hooks, &g));
  KVTRIM_RETURN_IF_ERROR(SampleAnswer(s, tok, prev, r, hooks, &g));
  return g;
}

}  // namespace kvtrim::server
