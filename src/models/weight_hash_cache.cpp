// weight_file_sha256 and its cache, keyed on the file's identity as stat(2) reports it.
#include "models/weight_hash_cache.h"

#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>

#include "io/sha256.h"
#include "qsmcore/error.h"
#include "qsmcore/models.h"

namespace qsmcore {
namespace {

struct Identity {
  dev_t device = 0;
  ino_t inode = 0;
  off_t size = 0;
  std::int64_t mtime_ns = 0;
  friend bool operator==(const Identity&, const Identity&) = default;
};

struct Entry {
  Identity identity;
  std::string sha256;
};

std::mutex& cache_mutex() {
  static std::mutex mutex;
  return mutex;
}

std::map<std::string, Entry>& cache() {
  static std::map<std::string, Entry> entries;
  return entries;
}

Identity identity_of(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw Error(ErrorKind::Io, "cannot stat " + path.string() + ": " + std::strerror(errno));
  return {st.st_dev, st.st_ino, st.st_size,
          std::int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
}

bool recently_modified(const Identity& identity) {
  const auto now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  constexpr std::int64_t kRacyWindowNs = 2'000'000'000;
  return identity.mtime_ns > now_ns - kRacyWindowNs;
}

}  // namespace

std::string weight_file_sha256(const std::filesystem::path& path) {
  const std::string key = std::filesystem::absolute(path).lexically_normal().string();
  const Identity before = identity_of(path);
  {
    std::lock_guard lock(cache_mutex());
    const auto it = cache().find(key);
    if (it != cache().end() && it->second.identity == before) return it->second.sha256;
  }
  std::string sha = io::sha256_file(path);
  // A file that changed while it was read has no trustworthy hash to keep. Nor has one written
  // in the last seconds: another write within the same timestamp tick, keeping the size, would
  // leave its identity unchanged (git's "racily clean" problem), so it is hashed again next time.
  if (identity_of(path) == before && !recently_modified(before)) {
    std::lock_guard lock(cache_mutex());
    cache()[key] = Entry{before, sha};
  }
  return sha;
}

namespace models_detail {

void remember_weight_sha256(const std::filesystem::path& path, const std::string& sha256) {
  const std::string key = std::filesystem::absolute(path).lexically_normal().string();
  const Identity identity = identity_of(path);
  std::lock_guard lock(cache_mutex());
  cache()[key] = Entry{identity, sha256};
}

}  // namespace models_detail
}  // namespace qsmcore
