// Consistency of a head's entries after compression (KvOptions::check_finite,
// always on in debug builds): sizes agree, keys and values are finite, and a
// log-weight is never NaN or +inf (-inf is allowed: an entry of zero
// cardinality, invisible to attention).
#pragma once
#include <limits>

#include "kv/cache.h"
#include "kvtrim/status.h"

namespace kvtrim::kv {

// The first problem found, naming the entry and the field; OK otherwise.
Status CheckHead(const HeadStore& s);
// Whether a log-weight may be stored (not NaN, not +inf).
inline bool ValidLogw(float b) { return b == b && b < std::numeric_limits<float>::infinity(); }

}  // namespace kvtrim::kv
