// The test server: one thread, one connection at a time, "Connection: close" on every reply so
// each client attempt is a fresh request the script can answer differently.
#include "models/local_http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

namespace qsmcore::testing {
namespace {

const char* reason_phrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 404: return "Not Found";
    case 408: return "Request Timeout";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Status";
  }
}

bool send_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);  // a vanished client must not kill us
    if (n <= 0) return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

// Waits up to `ms` for `fd` to be readable; false on timeout.
bool readable(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, ms) > 0;
}

}  // namespace

LocalHttpServer::LocalHttpServer(Script script) : script_(std::move(script)) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw std::runtime_error("socket failed");
  const int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;  // any free port
  socklen_t len = sizeof addr;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listen_fd_, 16) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(listen_fd_);
    throw std::runtime_error("cannot listen on 127.0.0.1");
  }
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { serve(); });
}

LocalHttpServer::~LocalHttpServer() {
  stop_ = true;
  thread_.join();
  ::close(listen_fd_);
}

std::string LocalHttpServer::base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }

void LocalHttpServer::serve() {
  while (!stop_) {
    if (!readable(listen_fd_, 20)) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    answer(fd);
    ::close(fd);
  }
}

void LocalHttpServer::answer(int fd) {
  std::string request;
  char chunk[4096];
  while (request.find("\r\n\r\n") == std::string::npos) {
    if (stop_ || !readable(fd, 2000)) return;
    const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) return;
    request.append(chunk, static_cast<std::size_t>(n));
  }
  // "GET /path HTTP/1.1"
  const std::size_t start = request.find(' ') + 1;
  const std::string path = request.substr(start, request.find(' ', start) - start);
  const Reply reply = script_(++requests_, path);
  if (reply.silent) return hold_open(fd);

  const std::size_t announced = reply.content_length.value_or(reply.body.size());
  const std::string head = "HTTP/1.1 " + std::to_string(reply.status) + " " + reason_phrase(reply.status) +
                           "\r\nContent-Length: " + std::to_string(announced) +
                           "\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n";
  const std::size_t body_bytes = std::min(reply.send_bytes.value_or(reply.body.size()), reply.body.size());
  if (!send_all(fd, head.data(), head.size()) || !send_all(fd, reply.body.data(), body_bytes)) return;
  if (reply.stall) hold_open(fd);
}

// Sends nothing more until the client gives up (closes) or the server stops.
void LocalHttpServer::hold_open(int fd) {
  char sink[256];
  while (!stop_) {
    if (!readable(fd, 20)) continue;
    if (::recv(fd, sink, sizeof sink, 0) <= 0) return;
  }
}

}  // namespace qsmcore::testing
