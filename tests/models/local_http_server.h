// A scripted HTTP/1.1 server on 127.0.0.1 for the download tests: each request gets the reply
// the test's script returns for it, including broken ones (wrong status, a body cut short, a
// connection that goes silent). No test touches the internet.
#pragma once
#include <atomic>
#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace qsmcore::testing {

struct Reply {
  int status = 200;
  std::string body{};
  std::optional<std::size_t> content_length{};  // announced length; default body.size()
  std::optional<std::size_t> send_bytes{};      // send only this much of the body; default all
  bool stall = false;   // after what was sent, keep the connection open, sending nothing
  bool silent = false;  // send nothing at all (not even a status line) and keep it open
};

class LocalHttpServer {
 public:
  using Script = std::function<Reply(int request_no, const std::string& path)>;  // request_no from 1
  explicit LocalHttpServer(Script script);
  ~LocalHttpServer();
  LocalHttpServer(const LocalHttpServer&) = delete;
  LocalHttpServer& operator=(const LocalHttpServer&) = delete;

  std::string base_url() const;  // "http://127.0.0.1:PORT"
  std::string url(const std::string& path) const { return base_url() + path; }
  int requests() const { return requests_.load(); }

 private:
  void serve();
  void answer(int fd);
  void hold_open(int fd);

  Script script_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::thread thread_;
};

}  // namespace qsmcore::testing
