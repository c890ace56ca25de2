// libFuzzer target: the context-file reader (io/context_file.h). Half the
// inputs are taken as whole files (magic, version and checksum must hold
// before anything else is read); the other half are wrapped behind a valid
// magic, version and checksum so that the header, token, logit and head
// sections are reached with arbitrary counts. Every count is checked
// against the bytes left: the reader answers an error or an image whose
// heads all hold pos.size() entries of row_bytes each; it never reads past
// the end (ASan) nor aborts.
#include <xxhash.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "io/context_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using kvtrim::io::ContextImage;
  std::string b;
  if (size > 0 && (data[0] & 1)) {
    b.assign(kvtrim::io::kContextMagic, sizeof(kvtrim::io::kContextMagic));
    const uint32_t version = kvtrim::io::kContextFormatVersion, flags = 0;
    b.append(reinterpret_cast<const char*>(&version), 4);
    b.append(reinterpret_cast<const char*>(&flags), 4);
    b.append(reinterpret_cast<const char*>(data + 1), size - 1);
    const uint64_t sum = XXH3_64bits(b.data(), b.size());
    b.append(reinterpret_cast<const char*>(&sum), 8);
  } else {
    b.assign(reinterpret_cast<const char*>(data), size);
  }
  auto img = kvtrim::io::ParseContextBytes(reinterpret_cast<const uint8_t*>(b.data()), b.size());
  if (!img.ok()) return 0;
  for (const ContextImage::Head& h : img->heads) {
    const size_t n = h.pos.size();
    if (h.logw.size() != n || h.k.size() != n * img->row_bytes || h.v.size() != n * img->row_bytes) std::abort();
  }
  return 0;
}
