// libFuzzer target: the server's request parsers (src/server/request.*) on
// arbitrary bodies. The first byte picks the parser (completion, chat,
// context, llama-server's completion, tokenize, detokenize, conversation,
// slot filename), the rest is the body. Properties: no crash, no exception escapes
// (every bad body is an error value that names a field or the JSON error),
// and a parsed request's KV overrides resolve against the default options
// either to valid KvOptions or to an error (never a policy the registry
// does not know).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kv/policy.h"
#include "server/context_backend.h"
#include "server/request.h"

using namespace kvtrim;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int which = data[0] % 8;
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (which == 4) {
    auto t = server::ParseTokenizeRequest(body);
    if (!t.ok() && t.error().message.empty()) std::abort();
    return 0;
  }
  if (which == 5) {
    auto d = server::ParseDetokenizeRequest(body, 2048);
    if (!d.ok() && d.error().message.empty()) std::abort();
    if (d.ok())
      for (int id : d.value())
        if (id < 0 || id >= 2048) std::abort();
    return 0;
  }
  if (which == 6) {  // a conversation's id, when given, can name a store key
    auto c = server::ParseConversationRequest(body);
    if (!c.ok() && c.error().message.empty()) std::abort();
    if (c.ok() && !c.value().id.empty() && !server::IsContextId(c.value().id)) std::abort();
    return 0;
  }
  if (which == 7) {  // a slot's filename becomes a store key: never a path
    auto f = server::ParseSlotFilename(body);
    if (!f.ok() && f.error().message.empty()) std::abort();
    if (f.ok() && !server::IsContextId(f.value())) std::abort();
    return 0;
  }
  if (which == 2) {
    auto c = server::ParseContextRequest(body);
    if (!c.ok()) {
      if (c.error().message.empty()) std::abort();
      return 0;
    }
    auto kv = server::ResolveKv(KvOptions{}, c.value().kv);
    if (kv.ok() && !kv::FindPolicy(kv.value().policy)) std::abort();
    return 0;
  }
  auto r = which == 0 ? server::ParseCompletionRequest(body)
           : which == 1 ? server::ParseChatRequest(body) : server::ParseLlamaCompletionRequest(body);
  if (!r.ok()) {
    if (r.error().message.empty()) std::abort();
    return 0;
  }
  if (r.value().max_tokens < -1) std::abort();  // -1: n_predict's "until EOS or the context is full"
  if (!r.value().conversation.empty() && !server::IsContextId(r.value().conversation)) std::abort();
  auto kv = server::ResolveKv(KvOptions{}, r.value().kv);
  if (kv.ok()) {
    if (!kv::FindPolicy(kv.value().policy)) std::abort();
    if (!(kv.value().ratio > 0 && kv.value().ratio <= 1)) std::abort();
  }
  return 0;
}
