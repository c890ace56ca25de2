// libFuzzer target: the server's request parsers (src/server/request.*) on
// arbitrary bodies. The first byte picks the parser (completion, chat,
// context), the rest is the body. Properties: no crash, no exception escapes
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
#include "server/request.h"

using namespace kvtrim;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int which = data[0] % 3;
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
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
  auto r = which == 0 ? server::ParseCompletionRequest(body) : server::ParseChatRequest(body);
  if (!r.ok()) {
    if (r.error().message.empty()) std::abort();
    return 0;
  }
  if (r.value().max_tokens < 0) std::abort();
  auto kv = server::ResolveKv(KvOptions{}, r.value().kv);
  if (kv.ok()) {
    if (!kv::FindPolicy(kv.value().policy)) std::abort();
    if (!(kv.value().ratio > 0 && kv.value().ratio <= 1)) std::abort();
  }
  return 0;
}
