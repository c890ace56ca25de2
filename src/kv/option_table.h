// The option table lives in the public API (kvtrim/option_table.h); the
// library's modules name it from kv:: as before.
#pragma once
#include "kvtrim/option_table.h"

namespace kvtrim::kv {
using kvtrim::KvOptionDefault;
using kvtrim::KvOptionsFingerprint;
using kvtrim::KvOptionsMarkdown;
using kvtrim::KvOptionSpec;
using kvtrim::KvOptionTable;
using kvtrim::KvOptionValue;
}  // namespace kvtrim::kv
