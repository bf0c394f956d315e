// SHA-256 through OpenSSL's EVP interface (the low-level SHA256_* calls are deprecated in 3.0).
#include "io/sha256.h"

#include <openssl/evp.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

#include "qsmcore/error.h"

namespace qsmcore::io {

struct Sha256::Ctx {
  EVP_MD_CTX* md = nullptr;
  ~Ctx() { EVP_MD_CTX_free(md); }
};

namespace {

void init(EVP_MD_CTX* md) {
  if (EVP_DigestInit_ex(md, EVP_sha256(), nullptr) != 1)
    throw Error(ErrorKind::Internal, "SHA-256: EVP_DigestInit_ex failed");
}

}  // namespace

Sha256::Sha256() : ctx_(std::make_unique<Ctx>()) {
  ctx_->md = EVP_MD_CTX_new();
  if (ctx_->md == nullptr) throw Error(ErrorKind::Internal, "SHA-256: EVP_MD_CTX_new failed");
  init(ctx_->md);
}

Sha256::~Sha256() = default;
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;

void Sha256::update(const void* data, std::size_t size) {
  if (size > 0 && EVP_DigestUpdate(ctx_->md, data, size) != 1)
    throw Error(ErrorKind::Internal, "SHA-256: EVP_DigestUpdate failed");
}

void Sha256::update(std::span<const std::byte> bytes) { update(bytes.data(), bytes.size()); }

std::string Sha256::hex_digest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(ctx_->md, digest, &length) != 1)
    throw Error(ErrorKind::Internal, "SHA-256: EVP_DigestFinal_ex failed");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * length);
  for (unsigned int i = 0; i < length; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 0xf]);
  }
  init(ctx_->md);
  return hex;
}

void Sha256::reset() { init(ctx_->md); }

std::string sha256_hex(std::span<const std::byte> bytes) {
  Sha256 hasher;
  hasher.update(bytes);
  return hasher.hex_digest();
}

std::string sha256_hex(std::string_view text) { return sha256_hex(std::as_bytes(std::span(text))); }

std::string sha256_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::Io, "cannot open " + path.string() + ": " + std::strerror(errno));
  Sha256 hasher;
  std::vector<char> chunk(1 << 20);
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    hasher.update(chunk.data(), static_cast<std::size_t>(in.gcount()));
  }
  if (in.bad()) throw Error(ErrorKind::Io, "cannot read " + path.string());
  return hasher.hex_digest();
}

bool is_sha256_hex(std::string_view text) {
  if (text.size() != 64) return false;
  for (char c : text)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace qsmcore::io
