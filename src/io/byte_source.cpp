#include "io/byte_source.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

#include "core/sys_io.h"
#include "qsmcore/error.h"
#include "qsmcore/memory.h"

namespace qsmcore::io {
namespace {

void check_range(const std::string& name, std::uint64_t size, std::uint64_t offset, std::size_t len) {
  if (offset > size || len > size - offset) {
    throw Error(ErrorKind::InvalidModel, name + ": byte range [" + std::to_string(offset) + ", " +
                                             std::to_string(offset + len) + ") is beyond the end of the data (" +
                                             std::to_string(size) + " bytes)");
  }
}

class FileSource final : public ByteSource {
 public:
  explicit FileSource(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw Error(ErrorKind::Io, "cannot open " + path_ + ": " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd_);
      throw Error(ErrorKind::Io, "cannot open " + path_ + ": not a regular file");
    }
    size_ = static_cast<std::uint64_t>(st.st_size);
  }
  ~FileSource() override {
    release_map();
    ::close(fd_);
  }
  const std::string& name() const override { return path_; }
  std::uint64_t size() const override { return size_; }
  void read(std::uint64_t offset, std::size_t len, void* dst) const override {
    check_range(path_, size_, offset, len);
    auto* out = static_cast<char*>(dst);
    while (len > 0) {
      const ssize_t got = sysio::pread(fd_, out, len, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        throw Error(ErrorKind::Io, "cannot read " + path_ + " at byte " + std::to_string(offset) + ": " +
                                       (got == 0 ? std::string("unexpected end of file") : std::strerror(errno)));
      }
      out += got;
      offset += static_cast<std::uint64_t>(got);
      len -= static_cast<std::size_t>(got);
    }
  }
  std::span<const std::uint8_t> map() const override {
    if (size_ == 0) return {};
    if (size_ > SIZE_MAX) throw Error(ErrorKind::Io, "cannot map " + path_ + ": larger than the address space");
    if (map_ != nullptr) return {static_cast<const std::uint8_t*>(map_), static_cast<std::size_t>(size_)};
    if (copy_.data() != nullptr) return {reinterpret_cast<const std::uint8_t*>(copy_.data()), copy_.size()};
#ifndef __EMSCRIPTEN__
    void* p = ::mmap(nullptr, static_cast<std::size_t>(size_), PROT_READ, MAP_PRIVATE, fd_, 0);
    if (p != MAP_FAILED) {
      map_ = p;
      return map();
    }
    if (errno != ENODEV) throw Error(ErrorKind::Io, "cannot map " + path_ + ": " + std::strerror(errno));
#endif
    // Emscripten's mmap is a malloc'd copy that no one accounts, and its WORKERFS cannot map:
    // the same copy, read here into accounted bytes (parser tables: Other), released after parsing.
    Buffer whole(static_cast<std::size_t>(size_), MemCategory::Other);
    read(0, whole.size(), whole.data());
    copy_ = std::move(whole);
    return map();
  }
  void release_map() const override {
    if (map_ != nullptr) ::munmap(map_, static_cast<std::size_t>(size_));
    map_ = nullptr;
    copy_.reset();
  }

 private:
  std::string path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
  mutable void* map_ = nullptr;
  mutable Buffer copy_;  // the file read whole, where it is not mapped
};

class MemorySource final : public ByteSource {
 public:
  MemorySource(std::span<const std::uint8_t> bytes, std::string name) : bytes_(bytes), name_(std::move(name)) {}
  const std::string& name() const override { return name_; }
  std::uint64_t size() const override { return bytes_.size(); }
  void read(std::uint64_t offset, std::size_t len, void* dst) const override {
    check_range(name_, bytes_.size(), offset, len);
    if (len) std::memcpy(dst, bytes_.data() + offset, len);
  }
  std::span<const std::uint8_t> map() const override { return bytes_; }

 private:
  std::span<const std::uint8_t> bytes_;
  std::string name_;
};

}  // namespace

std::shared_ptr<ByteSource> open_file_source(const std::string& path) { return std::make_shared<FileSource>(path); }

std::shared_ptr<ByteSource> memory_source(std::span<const std::uint8_t> bytes, std::string name) {
  return std::make_shared<MemorySource>(bytes, std::move(name));
}

}  // namespace qsmcore::io
