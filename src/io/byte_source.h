// Random-access byte sources: a file read with pread (never read whole into heap), or a
// caller-owned span. The ONNX reader parses the structure through map() and copies weights out
// through read(), so loading never holds the whole file in accounted memory.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace qsmcore::io {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  /// Name used in error messages (the path, or "<memory>").
  virtual const std::string& name() const = 0;
  virtual std::uint64_t size() const = 0;
  /// Copies [offset, offset+len) into dst. Throws Error{Io} naming the source on failure and
  /// Error{InvalidModel} if the range is outside the source.
  virtual void read(std::uint64_t offset, std::size_t len, void* dst) const = 0;
  /// A read-only view of the whole source (a private mmap for files; the span itself for memory
  /// sources). Only pages that are touched become resident; the view is not heap.
  virtual std::span<const std::uint8_t> map() const = 0;
};

/// Opens a file (throws Error{Io} "cannot open FILE: reason").
std::shared_ptr<ByteSource> open_file_source(const std::string& path);
/// Wraps a caller-owned span (must outlive the source).
std::shared_ptr<ByteSource> memory_source(std::span<const std::uint8_t> bytes, std::string name = "<memory>");

}  // namespace qsmcore::io
