// Compressed prompt caching (a completion's `cache_prompt: true`,
// docs/server.md): a prompt prefilled and compressed whole is stored in the
// context store under "prompt-" + the XXH3-64 (hex) of (the model's
// identity, the KV options, its token ids); a later prompt whose tokens
// begin with a stored prompt's forks it and prefills only the rest. The key
// of every prefix is computed in one pass, so the longest stored prefix is
// found among the store's ids (memory and backend: another replica's or a
// previous process's prompts are found too) without keeping token lists.
#pragma once
#include <string>
#include <unordered_set>
#include <vector>

namespace kvtrim::server {

// ids[k - 1] names the first k of `tokens` under `identity`
// (ContextIdentity of the engine and the KV options).
std::vector<std::string> PromptPrefixIds(const std::string& identity, const std::vector<int>& tokens);

// The largest k whose prefix id is in `have` (0: none).
size_t LongestStoredPrefix(const std::vector<std::string>& prefix_ids, const std::unordered_set<std::string>& have);

}  // namespace kvtrim::server
