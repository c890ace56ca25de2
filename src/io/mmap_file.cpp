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

size_t MappedFile::Release(const uint8_t* p, size_t n) const {
  if (!mapped_ || p < data_ || n > size_ || p - data_ > static_cast<ptrdiff_t>(size_ - n)) return 0;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t b = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t e = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  if (e <= b) return 0;
  if (::madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED) != 0) return 0;
  return e - b;
}

MappedFile::~MappedFile() {
  if (mapped_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace kvtrim::io
