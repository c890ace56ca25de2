#include "kv/check.h"

#include <cmath>
#include <string>
#include <vector>

namespace kvtrim::kv {

Status CheckHead(const HeadStore& s) {
  const int n = s.size(), d = s.head_dim();
  if (n < 0 || static_cast<int>(s.positions().size()) != n)
    return MakeError("head holds " + std::to_string(n) + " entries but " + std::to_string(s.positions().size()) +
                     " positions");
  if (s.BytesUsed() > s.BytesHeld()) return MakeError("head uses more bytes than it holds");
  std::vector<float> row(d);
  auto finite_row = [&](const char* what, int i) -> Status {
    for (int j = 0; j < d; ++j)
      if (!std::isfinite(row[j]))
        return MakeError(std::string(what) + " " + std::to_string(j) + " of entry " + std::to_string(i) + " (position " +
                         std::to_string(s.pos(i)) + ") is " + std::to_string(row[j]));
    return {};
  };
  for (int i = 0; i < n; ++i) {
    if (!ValidLogw(s.logw(i)))
      return MakeError("log-weight of entry " + std::to_string(i) + " (position " + std::to_string(s.pos(i)) + ") is " +
                       std::to_string(s.logw(i)));
    s.ReadKey(i, row.data());
    KVTRIM_RETURN_IF_ERROR(finite_row("key component", i));
    s.ReadValue(i, row.data());
    KVTRIM_RETURN_IF_ERROR(finite_row("value component", i));
  }
  return {};
}

}  // namespace kvtrim::kv
