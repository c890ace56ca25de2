// IsContextId (server/context_backend.h): the ids that may name a stored
// context or a conversation. Its own file: the request parsers use it and
// the fuzz library (fuzz/CMakeLists.txt) links them without the backends.
#include <cctype>

#include "server/context_backend.h"

namespace kvtrim::server {

bool IsContextId(const std::string& id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return false;
  return true;
}

Status CheckContextId(const std::string& what, const std::string& id) {
  if (IsContextId(id)) return {};
  return MakeError(what + " = '" + id + "': letters, digits, '-' and '_' only, at most 64 characters");
}

}  // namespace kvtrim::server
