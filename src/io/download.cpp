// download_verified over libcurl's easy interface. One handle serves every attempt (so a
// retry may reuse the connection); each attempt restarts the temporary file and the hash from
// byte 0, since a Range resume would trust bytes from an attempt that already went wrong.
#include "io/download.h"

#include <curl/curl.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <mutex>
#include <thread>

#include "io/atomic_file.h"
#include "io/sha256.h"
#include "qsmcore/error.h"

namespace qsmcore::io {
namespace {

void ensure_curl_initialised() {
  static std::once_flag once;
  static CURLcode rc = CURLE_OK;
  std::call_once(once, [] { rc = curl_global_init(CURL_GLOBAL_DEFAULT); });
  if (rc != CURLE_OK)
    throw Error(ErrorKind::Http, std::string("cannot initialise libcurl: ") + curl_easy_strerror(rc));
}

struct EasyHandle {
  CURL* curl = curl_easy_init();
  ~EasyHandle() { curl_easy_cleanup(curl); }
};

std::string megabytes(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", bytes / 1e6);
  return text;
}

// One line on stderr, redrawn at most ten times a second, and once more at the end so the
// last figure shown is the final one.
class ProgressLine {
 public:
  ProgressLine(std::string label, std::uint64_t expected) : label_(std::move(label)), expected_(expected) {}

  void update(std::uint64_t done, std::uint64_t announced) {
    done_ = done;
    if (announced > 0) total_ = announced;
    const auto now = std::chrono::steady_clock::now();
    if (drawn_ && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    draw();
  }

  void end_line() {
    if (!drawn_) return;
    draw();
    std::fputc('\n', stderr);
    drawn_ = false;
  }

 private:
  void draw() {
    drawn_ = true;
    const std::uint64_t total = total_ > 0 ? total_ : expected_;
    if (total > 0)
      std::fprintf(stderr, "\r%s  %s / %s MB  %3d%%", label_.c_str(), megabytes(double(done_)).c_str(),
                   megabytes(double(total)).c_str(), int(100.0 * double(done_) / double(total)));
    else
      std::fprintf(stderr, "\r%s  %s MB", label_.c_str(), megabytes(double(done_)).c_str());
    std::fflush(stderr);
  }

  std::string label_;
  std::uint64_t expected_;
  std::uint64_t done_ = 0;
  std::uint64_t total_ = 0;  // as announced by the server
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_{};
};

// What the callbacks of one attempt share.
struct Attempt {
  const DownloadTarget& target;
  AtomicFile& file;
  Sha256& hasher;
  ProgressLine* progress = nullptr;
  std::chrono::milliseconds stall_timeout{};
  std::exception_ptr failure{};  // thrown by our own code inside a callback
  bool over_size = false;
  bool stalled = false;
  curl_off_t last_done = 0;
  std::chrono::steady_clock::time_point last_data = std::chrono::steady_clock::now();
};

std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user) {
  auto& attempt = *static_cast<Attempt*>(user);
  const std::size_t length = size * count;
  try {
    if (attempt.target.bytes > 0 && attempt.file.size() + length > attempt.target.bytes) {
      attempt.over_size = true;
      return 0;  // makes libcurl stop with CURLE_WRITE_ERROR
    }
    attempt.hasher.update(data, length);
    attempt.file.write(data, length);
  } catch (...) {
    attempt.failure = std::current_exception();
    return 0;
  }
  return length;
}

// Also the stall watchdog: libcurl calls this about once a second even when no byte arrives.
// (CURLOPT_LOW_SPEED_TIME is not used: it averages over a window of several seconds, so a
// stall after some data was only noticed seconds late.)
int on_progress(void* user, curl_off_t total, curl_off_t done, curl_off_t, curl_off_t) {
  auto& attempt = *static_cast<Attempt*>(user);
  const auto now = std::chrono::steady_clock::now();
  if (done != attempt.last_done) {
    attempt.last_done = done;
    attempt.last_data = now;
  } else if (now - attempt.last_data > attempt.stall_timeout) {
    attempt.stalled = true;
    return 1;  // abort this attempt
  }
  if (attempt.progress != nullptr)
    attempt.progress->update(static_cast<std::uint64_t>(done), static_cast<std::uint64_t>(total));
  return 0;
}

// Transport errors that another attempt cannot fix.
bool is_permanent(CURLcode rc) {
  switch (rc) {
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
    case CURLE_NOT_BUILT_IN:
    case CURLE_TOO_MANY_REDIRECTS:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_FILESIZE_EXCEEDED:
    case CURLE_WRITE_ERROR:
    case CURLE_ABORTED_BY_CALLBACK:
    case CURLE_OUT_OF_MEMORY: return true;
    default: return false;
  }
}

std::string attempts_text(int n) { return std::to_string(n) + (n == 1 ? " attempt" : " attempts"); }

void configure(CURL* curl, const DownloadTarget& target, const HttpOptions& options, char* error_text) {
  curl_easy_setopt(curl, CURLOPT_URL, target.url.c_str());
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);  // the hosting redirects to its CDN
  curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_FAILONERROR, 1L);  // an error page must not become the file
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "qsmcore/0.1");
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);  // safe in threaded hosts
  curl_easy_setopt(curl, CURLOPT_BUFFERSIZE, 64L * 1024);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options.connect_timeout.count()));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);  // the stall watchdog lives there
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_text);
}

}  // namespace

bool is_retryable_http_status(long status) {
  return status == 408 || status == 425 || status == 429 || (status >= 500 && status <= 599);
}

std::chrono::milliseconds retry_backoff(std::string_view url, int retry, std::chrono::milliseconds base) {
  std::uint64_t url_sum = 0;
  for (unsigned char c : url) url_sum += c;
  const std::uint64_t spread_units = url_sum % 500 + 37u * static_cast<std::uint64_t>(retry);
  const auto b = static_cast<std::uint64_t>(base.count());
  const std::uint64_t exponential = b << std::min(retry - 1, 20);
  return std::chrono::milliseconds(static_cast<std::int64_t>(exponential + spread_units * b / 500));
}

DownloadResult download_verified(const DownloadTarget& target, const HttpOptions& options) {
  ensure_curl_initialised();
  EasyHandle handle;
  if (handle.curl == nullptr) throw Error(ErrorKind::Http, "cannot create a libcurl handle");
  char error_text[CURL_ERROR_SIZE] = {};
  configure(handle.curl, target, options, error_text);

  const std::string what = "download of " + target.label + " from " + target.url;
  AtomicFile file(target.dest, ".part");  // removed on every exit but commit()
  Sha256 hasher;
  const int max_attempts = std::max(1, options.max_attempts);
  int attempt_no = 1;
  for (;; ++attempt_no) {
    file.restart();
    hasher.reset();
    error_text[0] = '\0';
    ProgressLine progress(target.label, target.bytes);
    Attempt attempt{target, file, hasher};
    attempt.progress = options.show_progress ? &progress : nullptr;
    attempt.stall_timeout = options.stall_timeout;
    curl_easy_setopt(handle.curl, CURLOPT_WRITEDATA, &attempt);
    curl_easy_setopt(handle.curl, CURLOPT_XFERINFODATA, &attempt);
    const CURLcode rc = curl_easy_perform(handle.curl);
    progress.end_line();
    if (attempt.failure) std::rethrow_exception(attempt.failure);
    if (attempt.over_size)
      throw Error(ErrorKind::Checksum, "checksum mismatch for " + target.label +
                                           ": the server sent more than the " + std::to_string(target.bytes) +
                                           " bytes expected (" + target.url + ")");
    long status = 0;
    curl_easy_getinfo(handle.curl, CURLINFO_RESPONSE_CODE, &status);
    if (rc == CURLE_OK && status >= 200 && status < 300) break;

    std::string reason;
    bool retryable = false;
    if (attempt.stalled) {
      reason = "timed out: no data for " + std::to_string(options.stall_timeout.count()) + " ms";
      retryable = true;
    } else if (rc == CURLE_OK || rc == CURLE_HTTP_RETURNED_ERROR) {
      reason = "HTTP " + std::to_string(status);
      retryable = is_retryable_http_status(status);
    } else {
      reason = error_text[0] != '\0' ? std::string(error_text) : std::string(curl_easy_strerror(rc));
      if (rc == CURLE_OPERATION_TIMEDOUT) reason = "timed out: " + reason;
      retryable = !is_permanent(rc);
    }
    if (!retryable || attempt_no >= max_attempts)
      throw Error(ErrorKind::Http, what + " failed: " + reason + " after " + attempts_text(attempt_no));
    const auto wait = retry_backoff(target.url, attempt_no, options.backoff_base);
    if (options.show_progress)
      std::fprintf(stderr, "%s: %s; retrying in %.1f s\n", target.label.c_str(), reason.c_str(),
                   double(wait.count()) / 1000.0);
    if (options.on_retry) options.on_retry(attempt_no, reason, wait);
    std::this_thread::sleep_for(wait);
  }

  const std::string actual = hasher.hex_digest();
  if (!target.sha256.empty() && actual != target.sha256)
    throw Error(ErrorKind::Checksum, "checksum mismatch for " + target.label + ": expected " + target.sha256 +
                                         ", got " + actual + " (downloaded from " + target.url + ")");
  file.commit();
  return DownloadResult{attempt_no, file.size(), actual};
}

}  // namespace qsmcore::io
