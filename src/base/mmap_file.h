// A read-only memory map of a whole file (RAII). Weights are used in place from the map.
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

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace sluice
