#include "io/mmap_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kvtrim::io {

Expected<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return MakeError("cannot open '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    std::string msg = std::strerror(errno);
    ::close(fd);
    return MakeError("cannot stat '" + path + "': " + msg);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return MakeError("'" + path + "' is not a regular file");
  }
  std::unique_ptr<MappedFile> f(new MappedFile());
  f->size_ = static_cast<size_t>(st.st_size);
  if (f->size_ > 0) {
    void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      std::string msg = std::strerror(errno);
      ::close(fd);
      return MakeError("cannot mmap '" + path + "': " + msg);
    }
    f->data_ = static_cast<const uint8_t*>(p);
    f->mapped_ = true;
  }
  ::close(fd);
  return f;
}

std::unique_ptr<MappedFile> MappedFile::FromBuffer(std::string bytes) {
  std::unique_ptr<MappedFile> f(new MappedFile());
  f->owned_ = std::move(bytes);
  f->data_ = reinterpret_cast<const uint8_t*>(f->owned_.data());
  f->size_ = f->owned_.size();
  return f;
}

MappedFile::~MappedFile() {
  if (mapped_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace kvtrim::io
