// Streaming SHA-256 (OpenSSL EVP), so weight files of hundreds of MB are hashed in fixed-size
// chunks while they are read or downloaded, never held whole in memory.
#pragma once
#include <cstddef>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace qsmcore::io {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(std::span<const std::byte> bytes);
  void update(const void* data, std::size_t size);
  /// Lowercase hex digest; the hasher then starts over, empty.
  std::string hex_digest();
  /// Forgets what was fed (a download attempt that restarts from byte 0).
  void reset();

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

/// Lowercase hex SHA-256 of a buffer / of a whole file (read in 1 MiB chunks; Error{Io} naming
/// the file if it cannot be read).
std::string sha256_hex(std::span<const std::byte> bytes);
std::string sha256_hex(std::string_view text);
std::string sha256_file(const std::filesystem::path& path);

/// 64 lowercase hex digits: the only form the registry stores.
bool is_sha256_hex(std::string_view text);

}  // namespace qsmcore::io
