// Random-access byte sources: a file read with pread (never read whole into heap), or a
// caller-owned span. The ONNX reader parses the structure through map(), releases the view, and
// copies weights out through read(): after loading, a file source holds no view of the file.
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
  /// A read-only view of the whole source: a private mmap for files, of which only touched pages
  /// become resident; the span itself for memory sources. Where a file cannot be mapped (a
  /// browser File or Blob under WebAssembly's WORKERFS) or a map would be a hidden heap copy
  /// (every WebAssembly file system), the file is read into an accounted buffer instead.
  virtual std::span<const std::uint8_t> map() const = 0;
  /// Drops the view map() made (its spans become invalid); read() keeps working. Loading calls it
  /// once the structure is parsed, so a streamed model's file is not held in memory while it runs.
  virtual void release_map() const {}
};

/// Opens a file (throws Error{Io} "cannot open FILE: reason").
std::shared_ptr<ByteSource> open_file_source(const std::string& path);
/// Wraps a caller-owned span (must outlive the source).
std::shared_ptr<ByteSource> memory_source(std::span<const std::uint8_t> bytes, std::string name = "<memory>");

}  // namespace qsmcore::io
