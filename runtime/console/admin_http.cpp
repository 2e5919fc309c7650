#include "console/admin_http.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gost::runtime {

uint16_t admin_http::start(const std::string& host, uint16_t port, std::string& error) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    error = "http.listen host `" + host + "` is not an IPv4 address";
    return 0;
  }
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0
      || ::listen(listen_fd_, 64) != 0) {
    error = std::string{"cannot listen on http.listen="} + host + ":" + std::to_string(port) + " ("
            + std::strerror(errno) + "); choose another `http.listen`";
    return 0;
  }
  socklen_t len = sizeof(addr);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  thread_ = std::thread{[this] { serve(); }};
  return ntohs(addr.sin_port);
}

void admin_http::stop() {
  stopping_ = true;
  if (thread_.joinable())
    thread_.join();
  if (listen_fd_ >= 0)
    ::close(listen_fd_);
  listen_fd_ = -1;
}

void admin_http::serve() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0)
      continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0)
      continue;
    timeval tv{2, 0}; // a slow client cannot hold the thread for long
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    handle(fd);
    ::close(fd);
  }
}

void admin_http::handle(int fd) {
  std::string req;
  char buf[2048];
  while (req.find("\r\n\r\n") == std::string::npos && req.size() < 16384) {
    auto n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0)
      return;
    req.append(buf, static_cast<size_t>(n));
  }
  auto line_end = req.find("\r\n");
  auto line = req.substr(0, line_end);
  std::string code = "200 OK";
  std::string type = "text/plain; charset=utf-8";
  std::string body;
  if (line.rfind("GET ", 0) != 0) {
    code = "405 Method Not Allowed";
    body = "only GET is served\n";
  } else {
    auto path = line.substr(4, line.find(' ', 4) - 4);
    if (path == "/healthz") {
      body = "ok\n";
    } else if (path == "/readyz") {
      auto why = not_ready_();
      if (why.empty()) {
        body = "ready\n";
      } else {
        code = "503 Service Unavailable";
        body = "not ready: " + why + "\n";
      }
    } else if (path == "/metrics") {
      type = "text/plain; version=0.0.4; charset=utf-8";
      body = metrics_();
    } else if (path == "/") {
      type = "text/html; charset=utf-8";
      body = status_();
    } else {
      code = "404 Not Found";
      body = "not found; try /, /healthz, /readyz or /metrics\n";
    }
  }
  auto resp = "HTTP/1.1 " + code + "\r\nContent-Type: " + type + "\r\nContent-Length: "
              + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  size_t off = 0;
  while (off < resp.size()) {
    auto n = ::send(fd, resp.data() + off, resp.size() - off, MSG_NOSIGNAL);
    if (n <= 0)
      return;
    off += static_cast<size_t>(n);
  }
}

} // namespace gost::runtime
