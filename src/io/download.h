// HTTP(S) download of one file, verified and written atomically: bytes stream through SHA-256
// into "<dest>.part", which becomes <dest> only if the hash matches. Transient failures
// (408/425/429/5xx, transport errors, truncated bodies, stalls) are retried with exponential
// backoff; anything else fails at once. No failure leaves <dest>.part or a partial <dest>.
#pragma once
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

namespace qsmcore::io {

struct HttpOptions {
  int max_attempts = 5;
  std::chrono::milliseconds backoff_base{500};
  std::chrono::milliseconds connect_timeout{30'000};
  // No byte for this long abandons the attempt (checked about once a second).
  std::chrono::milliseconds stall_timeout{60'000};
  bool show_progress = false;  // a progress line on stderr
  // Called before each retry (tests count them; the CLI says why it waits).
  std::function<void(int failed_attempt, const std::string& reason, std::chrono::milliseconds wait)> on_retry;
};

struct DownloadTarget {
  std::string url;
  std::filesystem::path dest;  // its folder must exist
  std::string sha256;          // expected lowercase hex; "" = accept any bytes
  std::uint64_t bytes = 0;     // expected size; 0 = unknown. More bytes than this abort.
  std::string label;           // for messages and the progress line, e.g. the file name
};

struct DownloadResult {
  int attempts = 0;
  std::uint64_t bytes = 0;
  std::string sha256;  // of what was written
};

/// Throws Error{Http} ("... HTTP 404 after 1 attempt", "... <transport error> after 5
/// attempts"), Error{Checksum} (names the file, expected and actual hash) or Error{Io}.
DownloadResult download_verified(const DownloadTarget& target, const HttpOptions& options);

/// Wait before retry `retry` (1 = after the first failed attempt): base * 2^(retry-1) plus a
/// spread of (sum of the URL's bytes mod 500 + 37 * retry) * base / 500 (QSM.rs's formula when
/// base = 500 ms), so clients that failed together do not all come back at once.
std::chrono::milliseconds retry_backoff(std::string_view url, int retry, std::chrono::milliseconds base);

/// 408, 425, 429 and 5xx: the server may answer differently later.
bool is_retryable_http_status(long status);

}  // namespace qsmcore::io
