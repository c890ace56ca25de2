// The file of a compressed context (`kvtrim run --save-context F`,
// `--load-context F`, `kvtrim context inspect F`; docs/context-file.md):
// a versioned format of the project's own. This layer knows bytes only:
// magic and version, a JSON header (the model's and tokenizer's identity,
// the KV options, the shape: the engine checks it), the token ids, the last
// position's logits, and per KV head its entries in their stored type with
// positions and log-weights (b = log of the cardinality), then an XXH3-64
// checksum of everything before it. Written atomically; every count and
// offset is checked against the file's size when read.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvtrim/status.h"

namespace kvtrim::io {

inline constexpr char kContextMagic[8] = {'K', 'V', 'T', 'R', 'C', 'T', 'X', '\n'};
inline constexpr uint32_t kContextFormatVersion = 1;

struct ContextImage {
  nlohmann::json meta;          // checked by the engine (engine/context.cpp)
  std::vector<int32_t> tokens;  // every token of the context, BOS included
  std::vector<float> logits;    // the last position's
  size_t row_bytes = 0;         // bytes of one stored key (or value) row
  struct Head {
    std::vector<uint8_t> k, v;  // n rows of row_bytes each
    std::vector<int32_t> pos;   // [n]
    std::vector<float> logw;    // [n]
  };
  std::vector<Head> heads;      // flat layer * n_head_kv + head
};

// The bytes of a context file (what WriteContextFile writes; a Redis
// store keeps the same bytes under a key).
std::string SerializeContext(const ContextImage& img);
// Writes `bytes` to `path` atomically: a temporary file beside it
// ("PATH.tmp.PID.N"), fsync, rename over `path`, fsync of the directory. A
// reader never sees a partial file; a writer killed midway leaves only the
// temporary file.
Status WriteFileAtomically(const std::string& path, const std::string& bytes);
// SerializeContext then WriteFileAtomically; errors name the file.
Status WriteContextFile(const std::string& path, const ContextImage& img);
// Reads and checks a context file (magic, version, checksum, every count
// against the bytes left); errors name the file.
Expected<ContextImage> ReadContextFile(const std::string& path);
// The same over bytes in memory (tests, the fuzz target); errors name nothing.
Expected<ContextImage> ParseContextBytes(const uint8_t* data, size_t size);

}  // namespace kvtrim::io
