#include <algorithm>
#include <chrono>

#include "io/tokenizer.h"
#include "kvtrim/engine.h"

namespace kvtrim {

void AcceptHistory(const Session& s, Sampler& sampler) {
  for (int t : s.tokens()) sampler.Accept(t);  // the sampler keeps the last repeat_last_n
}

Expected<GenerateStats> Generate(Session& s, const std::vector<int>& prompt, int n, const SamplingOptions& so,
                                 const std::function<void(int)>& on_token, const PromptStep& step) {
  using Clock = std::chrono::steady_clock;
  if (prompt.empty() && s.position() == 0) return MakeError("empty prompt (it needs at least BOS)");
  if (n < 0) return MakeError("number of tokens to generate must be >= 0");
  GenerateStats st;
  st.prompt_tokens = static_cast<int>(prompt.size());
  auto t0 = Clock::now();
  if (!prompt.empty()) KVTRIM_RETURN_IF_ERROR(s.Prefill(prompt));
  if (step.compress) KVTRIM_RETURN_IF_ERROR(s.Compress());
  if (!step.save_context.empty()) KVTRIM_RETURN_IF_ERROR(s.SaveContext(step.save_context));
  auto t1 = Clock::now();
  st.prefill_s = std::chrono::duration<double>(t1 - t0).count();
  Sampler sampler(so);
  AcceptHistory(s, sampler);
  const int bos = s.bos(), eos = s.eos();
  for (int i = 0; i < n; ++i) {
    if (step.keep_going && !step.keep_going()) break;
    const auto ts = Clock::now();
    int tok = sampler.Sample(s.logits());
    st.sample_s += std::chrono::duration<double>(Clock::now() - ts).count();
    sampler.Accept(tok);
    const bool stop_id = std::find(so.stop_ids.begin(), so.stop_ids.end(), tok) != so.stop_ids.end();
    if (!so.ignore_eos && (tok == eos || tok == bos || stop_id)) break;  // end of text (llama2.c stops at BOS) or turn
    ++st.generated;
    if (on_token) on_token(tok);
    if (i + 1 == n) break;  // the last token is printed, never fed back
    KVTRIM_RETURN_IF_ERROR(s.Decode(tok));
    ++st.decode_steps;
  }
  st.decode_s = std::chrono::duration<double>(Clock::now() - t1).count();
  return st;
}

}  // namespace kvtrim
