#include "server/request.h"

#include "server/context_backend.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <variant>
#include <nlohmann/json.hpp>

#include "kvtrim/option_table.h"
#include "kv/policy.h"
#include "kvtrim/sampling.h"

namespace kvtrim::server {

namespace {

using nlohmann::json;

constexpr int kMaxStops = 16;

Expected<json> ParseObject(const std::string& body) {
  json j;
  try {
    j = json::parse(body);
  } catch (const json::exception& e) {
    return MakeError(std::string("invalid JSON: ") + e.what());
  }
  if (!j.is_object()) return MakeError("the request body must be a JSON object");
  return j;
}

// Each getter leaves `out` alone when the field is absent or null.
Status GetString(const json& j, const char* key, std::string* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return {};
  if (!it->is_string()) return MakeError(std::string("field '") + key + "' must be a string");
  *out = it->get<std::string>();
  return {};
}

Status GetBool(const json& j, const char* key, bool* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return {};
  if (!it->is_boolean()) return MakeError(std::string("field '") + key + "' must be true or false");
  *out = it->get<bool>();
  return {};
}

Status GetNumber(const json& j, const char* key, double lo, double hi, std::optional<double>* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return {};
  if (!it->is_number()) return MakeError(std::string("field '") + key + "' must be a number");
  const double v = it->get<double>();
  if (!(v >= lo && v <= hi))
    return MakeError(std::string("field '") + key + "' = " + it->dump() + " is outside [" + json(lo).dump() + ", " +
                     json(hi).dump() + "]");
  *out = v;
  return {};
}

Status GetInt(const json& j, const char* key, int64_t lo, int64_t hi, std::optional<int64_t>* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return {};
  if (!it->is_number_integer()) return MakeError(std::string("field '") + key + "' must be an integer");
  if (it->is_number_unsigned() ? it->get<uint64_t>() > static_cast<uint64_t>(hi) : it->get<int64_t>() > hi)
    return MakeError(std::string("field '") + key + "' = " + it->dump() + " is above " + std::to_string(hi));
  const int64_t v = it->is_number_unsigned() ? static_cast<int64_t>(it->get<uint64_t>()) : it->get<int64_t>();
  if (v < lo) return MakeError(std::string("field '") + key + "' = " + it->dump() + " is below " + std::to_string(lo));
  *out = v;
  return {};
}

// A policy flag's value: a number, true/false for a switch, or the name of a choice.
Expected<double> ParamValue(const std::string& name, const json& v) {
  if (v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
  if (v.is_number()) return v.get<double>();
  if (!v.is_string()) return MakeError("kv_params['" + name + "'] must be a number, true/false or a choice name");
  const std::string s = v.get<std::string>();
  for (const auto& info : kv::Registry())
    for (const auto& p : info.params) {
      if (p.name != name) continue;
      for (size_t i = 0; i < p.choices.size(); ++i)
        if (p.choices[i] == s) return static_cast<double>(i);
    }
  return MakeError("kv_params['" + name + "'] = \"" + s + "\" is not a choice of that flag");
}

// One table option from its request field into `out`, by the field's type,
// in the table's range and choices.
Status GetField(const json& j, const KvOptionSpec& s, std::string* out) {
  KVTRIM_RETURN_IF_ERROR(GetString(j, s.request.c_str(), out));
  if (s.choices.empty() || std::find(s.choices.begin(), s.choices.end(), *out) != s.choices.end()) return {};
  std::string names;
  for (const std::string& c : s.choices) names += (names.empty() ? "" : ", ") + c;
  return MakeError("field '" + s.request + "' = '" + *out + "' is not one of " + names);
}

Status GetField(const json& j, const KvOptionSpec& s, double* out) {
  std::optional<double> x;
  KVTRIM_RETURN_IF_ERROR(GetNumber(j, s.request.c_str(), s.lo, s.hi, &x));
  if (x && s.lo_open && *x <= s.lo)
    return MakeError("field '" + s.request + "' must be in (" + json(s.lo).dump() + ", " + json(s.hi).dump() + "]");
  if (x) *out = *x;
  return {};
}

Status GetField(const json& j, const KvOptionSpec& s, int* out) {
  std::optional<int64_t> x;
  KVTRIM_RETURN_IF_ERROR(GetInt(j, s.request.c_str(), static_cast<int64_t>(std::max(s.lo, -2147483648.0)),
                                static_cast<int64_t>(std::min(s.hi, 2147483647.0)), &x));
  if (x) *out = static_cast<int>(*x);
  return {};
}

Status GetField(const json& j, const KvOptionSpec& s, bool* out) { return GetBool(j, s.request.c_str(), out); }

// The KV fields of a request: one per row of the option table that has a
// request field (kv/option_table.cpp), then `kv_params`.
Status ParseKv(const json& j, KvOverrides* kv) {
  for (const KvOptionSpec& s : KvOptionTable()) {
    if (s.request.empty() || !j.contains(s.request) || j[s.request].is_null()) continue;
    KVTRIM_RETURN_IF_ERROR(
        std::visit([&](auto field) { return GetField(j, s, &(kv->values.*field)); }, s.field));
    if (s.check) {
      Status st = s.check(kv->values);
      if (!st.ok()) return MakeError("field '" + s.request + "': " + st.error().message);
    }
    kv->given.insert(s.name);
  }
  auto it = j.find("kv_params");
  if (it != j.end() && !it->is_null()) {
    if (!it->is_object()) return MakeError("field 'kv_params' must be an object of policy flags");
    for (const auto& [name, v] : it->items()) {
      auto x = ParamValue(name, v);
      if (!x.ok()) return x.error();
      kv->params[name] = x.value();
    }
  }
  if (kv->given.count("kv") && !kv->params.empty()) {  // flags of the named policy, in range
    auto p = kv::MakePolicy(kv->values.policy, kv->params);
    if (!p.ok()) return MakeError("kv_params: " + p.error().message);
  }
  return {};
}

Status ParseStop(const json& j, std::vector<std::string>* stop) {
  auto it = j.find("stop");
  if (it == j.end() || it->is_null()) return {};
  if (it->is_string()) {
    if (!it->get<std::string>().empty()) stop->push_back(it->get<std::string>());
    return {};
  }
  if (!it->is_array()) return MakeError("field 'stop' must be a string or an array of strings");
  if (it->size() > kMaxStops) return MakeError("field 'stop' holds more than " + std::to_string(kMaxStops) + " strings");
  for (const auto& s : *it) {
    if (!s.is_string()) return MakeError("field 'stop' must be a string or an array of strings");
    if (!s.get<std::string>().empty()) stop->push_back(s.get<std::string>());
  }
  return {};
}

// One sampling option from its request field (kvtrim/sampling.h), in range.
Status GetSampling(const json& j, const SamplingOptionSpec& s, SamplingOptions* out) {
  const char* key = s.request.c_str();
  if (s.integer()) {
    std::optional<int64_t> x;
    KVTRIM_RETURN_IF_ERROR(GetInt(j, key, s.int_lo(), s.int_hi(), &x));
    if (x) std::visit([&](auto f) { out->*f = static_cast<std::remove_reference_t<decltype(out->*f)>>(*x); }, s.field);
    return {};
  }
  std::optional<double> x;
  KVTRIM_RETURN_IF_ERROR(GetNumber(j, key, s.lo, s.hi, &x));
  if (x && s.lo_open && *x <= s.lo)
    return MakeError("field '" + s.request + "' = " + json(*x).dump() + " is outside " + SamplingOptionRange(s));
  if (x) out->*std::get<float SamplingOptions::*>(s.field) = static_cast<float>(*x);
  return {};
}

// The fields both completion endpoints share.
Status ParseCommon(const json& j, CompletionRequest* r) {
  std::optional<int64_t> i, np;
  KVTRIM_RETURN_IF_ERROR(GetInt(j, "max_tokens", 0, 1 << 20, &i));
  KVTRIM_RETURN_IF_ERROR(GetInt(j, "n_predict", -1, 1 << 20, &np));  // llama.cpp's name for it; -1: no limit
  if (i && np && *i != *np)
    return MakeError("fields 'max_tokens' = " + std::to_string(*i) + " and 'n_predict' = " + std::to_string(*np) +
                     " disagree: give one");
  if (i || np) r->max_tokens = static_cast<int>(i ? *i : *np);
  i.reset();
  KVTRIM_RETURN_IF_ERROR(GetInt(j, "n", 1, 1 << 20, &i));
  if (i && *i != 1) return MakeError("field 'n': only one choice per request (n = 1) is served");
  for (const SamplingOptionSpec& s : SamplingOptionTable()) KVTRIM_RETURN_IF_ERROR(GetSampling(j, s, &r->sampling));
  KVTRIM_RETURN_IF_ERROR(GetBool(j, "ignore_eos", &r->sampling.ignore_eos));
  KVTRIM_RETURN_IF_ERROR(GetBool(j, "stream", &r->stream));
  KVTRIM_RETURN_IF_ERROR(GetBool(j, "return_tokens", &r->return_tokens));
  std::string model;
  KVTRIM_RETURN_IF_ERROR(GetString(j, "model", &model));  // any name: one model is served
  KVTRIM_RETURN_IF_ERROR(GetString(j, "context_id", &r->context_id));
  KVTRIM_RETURN_IF_ERROR(GetBool(j, "cache_prompt", &r->cache_prompt));
  i.reset();
  KVTRIM_RETURN_IF_ERROR(GetInt(j, "id_slot", -1, 1 << 20, &i));  // checked against --parallel by the server
  if (i) r->id_slot = static_cast<int>(*i);
  if (r->cache_prompt && !r->context_id.empty())
    return MakeError("'cache_prompt' and 'context_id' exclude each other: a stored context is already cached");
  KVTRIM_RETURN_IF_ERROR(ParseStop(j, &r->stop));
  KVTRIM_RETURN_IF_ERROR(ParseKv(j, &r->kv));
  if (!r->context_id.empty() && r->kv.any())
    return MakeError("KV fields cannot be given with 'context_id': the stored context keeps the KV options it was "
                     "compressed with (POST /v1/contexts)");
  return {};
}

}  // namespace

Expected<CompletionRequest> ParseCompletionRequest(const std::string& body) {
  auto j = ParseObject(body);
  if (!j.ok()) return j.error();
  CompletionRequest r;
  auto it = j->find("prompt");
  if (it != j->end() && !it->is_null()) {
    if (it->is_array() && it->size() == 1 && (*it)[0].is_string()) r.prompt = (*it)[0].get<std::string>();
    else if (it->is_string()) r.prompt = it->get<std::string>();
    else return MakeError("field 'prompt' must be a string");
  }
  KVTRIM_RETURN_IF_ERROR(ParseCommon(j.value(), &r));
  return r;
}

Expected<CompletionRequest> ParseLlamaCompletionRequest(const std::string& body) {
  auto j = ParseObject(body);
  if (!j.ok()) return j.error();
  CompletionRequest r;
  r.llama = true;
  r.max_tokens = -1;  // llama-server's n_predict default
  auto it = j->find("prompt");
  if (it == j->end() || !it->is_string())
    return MakeError("field 'prompt' must be a string (token arrays are not read)");
  r.prompt = it->get<std::string>();
  KVTRIM_RETURN_IF_ERROR(ParseCommon(j.value(), &r));
  return r;
}

Expected<CompletionRequest> ParseChatRequest(const std::string& body) {
  auto j = ParseObject(body);
  if (!j.ok()) return j.error();
  CompletionRequest r;
  r.chat = true;
  auto it = j->find("messages");
  if (it == j->end() || !it->is_array() || it->empty())
    return MakeError("field 'messages' must be a non-empty array of {role, content} objects");
  for (size_t k = 0; k < it->size(); ++k) {
    const json& m = (*it)[k];
    const std::string at = "messages[" + std::to_string(k) + "]";
    if (!m.is_object()) return MakeError(at + " must be an object with 'role' and 'content'");
    ChatMessage msg;
    if (!m.contains("role") || !m["role"].is_string()) return MakeError(at + ".role must be a string");
    msg.role = m["role"].get<std::string>();
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant")
      return MakeError(at + ".role = '" + msg.role + "' is not one of system, user, assistant");
    if (!m.contains("content") || !m["content"].is_string()) return MakeError(at + ".content must be a string");
    msg.content = m["content"].get<std::string>();
    r.messages.push_back(std::move(msg));
  }
  KVTRIM_RETURN_IF_ERROR(ParseCommon(j.value(), &r));
  KVTRIM_RETURN_IF_ERROR(GetString(j.value(), "conversation", &r.conversation));
  if (!r.conversation.empty()) {
    KVTRIM_RETURN_IF_ERROR(CheckContextId("field 'conversation'", r.conversation));
    if (!r.context_id.empty() || r.cache_prompt)
      return MakeError("'conversation' excludes 'context_id' and 'cache_prompt': a conversation is its own context");
  }
  return r;
}

Expected<ContextRequest> ParseContextRequest(const std::string& body) {
  auto j = ParseObject(body);
  if (!j.ok()) return j.error();
  ContextRequest r;
  auto it = j->find("text");
  if (it == j->end() || !it->is_string() || it->get<std::string>().empty())
    return MakeError("field 'text' must be a non-empty string");
  r.text = it->get<std::string>();
  KVTRIM_RETURN_IF_ERROR(ParseKv(j.value(), &r.kv));
  return r;
}

Expected<ConversationRequest> ParseConversationRequest(const std::string& body) {
  ConversationRequest r;
  if (body.find_first_not_of(" \t\r\n") == std::string::npos) return r;  // no body: every default
  auto j = ParseObject(body);
  if (!j.ok()) return j.error();
  KVTRIM_RETURN_IF_ERROR(GetString(j.value(), "id", &r.id));
  if (!r.id.empty()) KVTRIM_RETURN_IF_ERROR(CheckContextId("field 'id'", r.id));
  KVTRIM_RETURN_IF_ERROR(ParseKv(j.value(), &r.kv));
  return r;
}

Expected<std::string> ParseSlotFilename(const std::string& body) {
  auto j = ParseObject(body);
  if (!j.ok()) return j.error();
  std::string name;
  KVTRIM_RETURN_IF_ERROR(GetString(j.value(), "filename", &name));
  if (name.empty()) return MakeError("field 'filename' must be a non-empty string");
  std::string id = name;
  for (char& c : id)
    if (c == '.') c = '_';
  if (!IsContextId(id))
    return MakeError("field 'filename' = '" + name + "': letters, digits, '-', '_' and '.' only, at most 64 characters");
  return id;
}

Expected<TokenizeRequest> ParseTokenizeRequest(const std::string& body) {
  auto j = ParseObject(body);
  if (!j.ok()) return j.error();
  TokenizeRequest r;
  auto it = j->find("content");
  if (it == j->end() || !it->is_string()) return MakeError("field 'content' must be a string");
  r.content = it->get<std::string>();
  KVTRIM_RETURN_IF_ERROR(GetBool(j.value(), "add_special", &r.add_special));
  KVTRIM_RETURN_IF_ERROR(GetBool(j.value(), "with_pieces", &r.with_pieces));
  return r;
}

Expected<std::vector<int>> ParseDetokenizeRequest(const std::string& body, int vocab) {
  auto j = ParseObject(body);
  if (!j.ok()) return j.error();
  auto it = j->find("tokens");
  if (it == j->end() || !it->is_array()) return MakeError("field 'tokens' must be an array of token ids");
  std::vector<int> ids;
  for (size_t k = 0; k < it->size(); ++k) {
    const json& t = (*it)[k];
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= vocab)
      return MakeError("tokens[" + std::to_string(k) + "] must be a token id in [0, " + std::to_string(vocab) + ")");
    ids.push_back(t.get<int>());
  }
  return ids;
}

Expected<KvOptions> ResolveKv(const KvOptions& defaults, const KvOverrides& o) {
  KvOptions k = defaults;
  if (o.given.count("kv") && o.values.policy != defaults.policy) k.params.clear();  // the default's flags are its own
  for (const KvOptionSpec& s : KvOptionTable())
    if (o.given.count(s.name)) std::visit([&](auto field) { k.*field = o.values.*field; }, s.field);
  if (o.given.count("kv-ratio")) {  // an asked-for ratio, as --kv-ratio; a budget given beside it wins
    k.ratio_explicit = true;
    if (!o.given.count("kv-budget")) k.budget_tokens = 0;
  }
  for (const auto& [name, v] : o.params) k.params[name] = v;
  auto p = kv::MakePolicy(k.policy, k.params);
  if (!p.ok()) return MakeError("kv_params: " + p.error().message);
  return k;
}

}  // namespace kvtrim::server
