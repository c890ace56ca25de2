// Read-only memory map of a whole file.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "kvtrim/status.h"

namespace kvtrim::io {

class MappedFile {
 public:
  static Expected<std::unique_ptr<MappedFile>> Open(const std::string& path);
  // Wrap a caller-owned buffer (tests feed corrupted copies this way).
  static std::unique_ptr<MappedFile> FromBuffer(std::string bytes);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // Tells the kernel that [p, p + n) of a mapped file will not be read soon:
  // the whole pages inside it leave the process's resident memory (a later
  // read faults them back in from the file, unchanged: the mapping is
  // private and never written). Returns the bytes released; 0 for a
  // caller-owned buffer (whose pages must keep their contents) or a range
  // outside the file.
  size_t Release(const uint8_t* p, size_t n) const;

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;
  std::string owned_;
};

}  // namespace kvtrim::io
