// A read-only memory map of a whole file (RAII). Weights read in place (embedding tables,
// types without a repacked layout) are used from the map; the pages of weights that were
// copied elsewhere (repacked at load) are handed back with release(), so that the process
// holds each weight once (docs/architecture.md, "One copy of the weights").
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace sluice {

class MmapFile {
 public:
  // Throws sluice::Error naming the path if it cannot be opened or mapped.
  explicit MmapFile(const std::string& path);
  ~MmapFile();
  MmapFile(const MmapFile&) = delete;
  MmapFile& operator=(const MmapFile&) = delete;

  const std::string& path() const { return path_; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  size_t size() const { return size_; }
  // Drops this process's pages of [p, p + n) ∩ the map (MADV_DONTNEED, the range widened to
  // whole pages): they leave its resident set. The bytes stay readable: the map is read-only
  // and private, so the next touch reads the page back from the file (or the page cache),
  // never zeros. Ranges outside the map are ignored, so a caller may pass any pointer.
  void release(const void* p, size_t n) const;

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Maps the pages of [p, p + n) of a file mapping now (MADV_POPULATE_READ; where the kernel
// lacks it, Linux < 5.14, only asks for read-ahead): for tables read a row at a time during
// decode, so no decode step pays for a page fault. A hint: failures are ignored.
void prefault(const void* p, size_t n);

}  // namespace sluice
