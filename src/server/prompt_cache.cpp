#include "server/prompt_cache.h"

#include <xxhash.h>  // Debian libxxhash-dev: the keys (XXH3-64, streamed)

#include <cstdio>
#include <memory>

namespace kvtrim::server {

std::vector<std::string> PromptPrefixIds(const std::string& identity, const std::vector<int>& tokens) {
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> st(XXH3_createState(), &XXH3_freeState);
  XXH3_64bits_reset(st.get());
  const uint64_t n = identity.size();
  XXH3_64bits_update(st.get(), &n, sizeof(n));  // the identity's length first: no ambiguity with the tokens
  XXH3_64bits_update(st.get(), identity.data(), identity.size());
  std::vector<std::string> ids;
  ids.reserve(tokens.size());
  char hex[17];
  for (int t : tokens) {
    const int32_t v = t;
    XXH3_64bits_update(st.get(), &v, sizeof(v));
    std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(XXH3_64bits_digest(st.get())));
    ids.push_back(std::string("prompt-") + hex);
  }
  return ids;
}

size_t LongestStoredPrefix(const std::vector<std::string>& prefix_ids, const std::unordered_set<std::string>& have) {
  for (size_t k = prefix_ids.size(); k > 0; --k)
    if (have.count(prefix_ids[k - 1])) return k;
  return 0;
}

}  // namespace kvtrim::server
