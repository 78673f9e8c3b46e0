#include "base/mmap_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "base/error.h"

namespace sluice {

MmapFile::MmapFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("%s: cannot open: %s", path.c_str(), std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    fail("%s: cannot stat: %s", path.c_str(), std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("%s: not a regular file", path.c_str());
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      fail("%s: cannot mmap %zu bytes: %s", path.c_str(), size_, std::strerror(e));
    }
    data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
}

void prefault(const void* p, size_t n) {
  if (p == nullptr || n == 0) return;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
  const size_t len = reinterpret_cast<uintptr_t>(p) + n - begin;
#ifdef MADV_POPULATE_READ
  if (::madvise(reinterpret_cast<void*>(begin), len, MADV_POPULATE_READ) == 0) return;
#endif
  ::madvise(reinterpret_cast<void*>(begin), len, MADV_WILLNEED);
}

void MmapFile::release(const void* p, size_t n) const {
  const uintptr_t lo = reinterpret_cast<uintptr_t>(data_), hi = lo + size_;
  uintptr_t b = reinterpret_cast<uintptr_t>(p);
  if (data_ == nullptr || n == 0 || b >= hi || b + n <= lo) return;
  uintptr_t e = std::min<uintptr_t>(b + n, hi);
  b = std::max(b, lo);
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  b &= ~(page - 1);                                             // the map starts on a page boundary: b stays inside it
  e = (e + page - 1) & ~(page - 1);                             // the map's last page is whole in memory
  ::madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);  // a hint: failures leave pages resident
}

MmapFile::~MmapFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace sluice
