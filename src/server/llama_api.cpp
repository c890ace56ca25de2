// llama-server's own endpoints, for clients written against it
// (docs/server.md "llama-server's endpoints"): POST /tokenize and
// /detokenize, GET /props, and the response shapes of POST /completion (the
// request runs the /v1/completions machinery, completion.cpp).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "engine/engine_impl.h"
#include "io/tokenizer.h"
#include "model/config.h"
#include "server/generation.h"
#include "server/impl.h"

namespace kvtrim::server {

namespace {

double PerSecond(int n, double ms) { return ms > 0 ? 1000.0 * n / ms : 0.0; }

}  // namespace

// {"content", "add_special" (BOS, default false), "with_pieces" (default
// false)} -> {"tokens": [id...]} or {"tokens": [{"id", "piece"}...]}.
void Server::Impl::Tokenize(const std::string& body, httplib::Response& res) {
  auto r = ParseTokenizeRequest(body);
  if (!r.ok()) return SendError(res, 400, r.error().message);
  const io::Tokenizer& tok = engine.impl().tokenizer();
  const std::vector<int> ids = tok.Encode(r->content, r->add_special);
  json tokens = json::array();
  for (size_t k = 0; k < ids.size(); ++k) {
    if (r->with_pieces) tokens.push_back({{"id", ids[k]}, {"piece", tok.Piece(k > 0 ? ids[k - 1] : -1, ids[k])}});
    else tokens.push_back(ids[k]);
  }
  res.set_content(Dump(json{{"tokens", tokens}}), "application/json");
}

// {"tokens": [id...]} -> {"content": text} as llama-server gives it (VerbatimText);
// an id outside the vocabulary is an error.
void Server::Impl::Detokenize(const std::string& body, httplib::Response& res) {
  auto ids = ParseDetokenizeRequest(body, engine.impl().tokenizer().vocab_size());
  if (!ids.ok()) return SendError(res, 400, ids.error().message);
  res.set_content(Dump(json{{"content", VerbatimText(engine.impl().tokenizer(), ids.value())}}), "application/json");
}

// What llama-server's GET /props reports that applies here.
json Server::Impl::Props() const {
  std::string tmpl;
  if (engine.impl().file().Find("tokenizer.chat_template"))
    if (auto t = engine.impl().file().GetString("tokenizer.chat_template")) tmpl = *t;
  const SamplingOptions d;  // the requests' defaults (kvtrim run's)
  auto dec = [](float x) { return std::round(static_cast<double>(x) * 1e6) / 1e6; };  // 0.8, not 0.800000011920929
  json params{{"n_predict", -1}, {"temperature", dec(d.temp)}, {"top_k", d.top_k}, {"top_p", dec(d.top_p)},
              {"min_p", dec(d.min_p)}, {"seed", d.seed}};
  return json{{"default_generation_settings", {{"n_ctx", Ctx()}, {"params", params}, {"model", o.model_name}}},
              {"total_slots", o.parallel},
              {"model_path", o.model_name},
              {"chat_template", tmpl},
              {"build_info", "kvtrim"},
              {"kvtrim", {{"kv_default", KvJson(o.kv)}, {"vocab", engine.impl().config().vocab}}}};
}

std::string VerbatimText(const io::Tokenizer& tok, const std::vector<int>& ids) {
  // Piece() drops a SentencePiece word's leading space at the start or after
  // BOS (kvtrim's detokenizing, as `run` prints); llama-server keeps it.
  constexpr int kNotAtStart = std::numeric_limits<int>::max();
  std::string out;
  for (int id : ids) out += id == tok.bos() || id == tok.eos() ? tok.piece_text(id) : tok.Piece(kNotAtStart, id);
  return out;
}

json LlamaCompletionJson(const Generation& g, const std::string& content, const LlamaAnswerInfo& info) {
  const std::string stop_type = g.finish_reason == "length" ? "limit" : g.stopped_by_word ? "word" : "eos";
  const int prompt_n = info.prompt_n;
  auto per_token = [](double ms, int n) { return n > 0 ? ms / n : 0.0; };
  json timings{{"prompt_n", prompt_n},
               {"prompt_ms", g.prefill_ms},
               {"prompt_per_token_ms", per_token(g.prefill_ms, g.prompt_tokens)},
               {"prompt_per_second", PerSecond(g.prompt_tokens, g.prefill_ms)},
               {"predicted_n", g.completion_tokens},
               {"predicted_ms", g.decode_ms},
               {"predicted_per_token_ms", per_token(g.decode_ms, g.completion_tokens)},
               {"predicted_per_second", PerSecond(g.completion_tokens, g.decode_ms)}};
  json settings = json::object();
  if (const CompletionRequest* r = info.request) {
    const SamplingOptions& so = r->sampling;
    auto dec = [](float x) { return std::round(static_cast<double>(x) * 1e6) / 1e6; };
    settings = json{{"n_predict", r->max_tokens}, {"seed", so.seed},         {"temperature", dec(so.temp)},
                    {"top_k", so.top_k},          {"top_p", dec(so.top_p)}, {"min_p", dec(so.min_p)},
                    {"repeat_last_n", so.repeat_last_n}, {"repeat_penalty", dec(so.repeat_penalty)},
                    {"stop", r->stop},            {"max_tokens", r->max_tokens}, {"ignore_eos", so.ignore_eos},
                    {"stream", r->stream}};
  }
  return json{{"index", 0},
              {"content", content},
              {"tokens", json::array()},
              {"id_slot", info.slot},
              {"stop", true},
              {"model", info.model},
              {"tokens_predicted", g.completion_tokens},
              {"tokens_evaluated", prompt_n},
              {"generation_settings", settings},
              {"prompt", info.prompt_text},
              {"has_new_line", g.text.find('\n') != std::string::npos},
              {"truncated", false},
              {"stop_type", stop_type},
              {"stopping_word", g.stop_word},
              {"tokens_cached", g.tokens_held},
              {"timings", timings}};
}

json LlamaChunkJson(const std::string& content) { return json{{"content", content}, {"stop", false}}; }

}  // namespace kvtrim::server
