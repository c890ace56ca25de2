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

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;
  std::string owned_;
};

}  // namespace kvtrim::io
