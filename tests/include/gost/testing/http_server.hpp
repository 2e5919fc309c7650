#pragma once
// A local HTTP endpoint for tests of HTTP actions (scheduled actions): one thread on
// 127.0.0.1 (a free port), answering each request with the next status of its script (the
// last one repeated) and recording each request's Idempotency-Key and arrival time.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace gost::testing {

/// A one-thread HTTP/1.1 server on 127.0.0.1 answering each request with the next status of
/// its script (the last one repeated), recording the Idempotency-Key of each.
class http_server {
public:
  explicit http_server(std::vector<int> statuses) : statuses_(std::move(statuses)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0)
      throw std::runtime_error{"http_server: socket"};
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
      throw std::runtime_error{"http_server: bind"};
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    if (::listen(fd_, 16) != 0)
      throw std::runtime_error{"http_server: listen"};
    thread_ = std::thread{[this] { serve(); }};
  }
  ~http_server() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/hook"; }
  std::vector<std::string> keys() const {
    std::lock_guard<std::mutex> g{mtx_};
    return keys_;
  }
  /// When each request arrived (system clock, ms since the epoch).
  std::vector<int64_t> arrivals() const {
    std::lock_guard<std::mutex> g{mtx_};
    return arrivals_;
  }

private:
  void serve() {
    while (!stop_) {
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0)
        return;
      std::string req;
      char buf[4096];
      while (req.find("\r\n\r\n") == std::string::npos) {
        auto n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0)
          break;
        req.append(buf, static_cast<size_t>(n));
      }
      std::string key;
      auto k = req.find("Idempotency-Key: ");
      if (k != std::string::npos)
        key = req.substr(k + 17, req.find("\r\n", k) - k - 17);
      int status;
      {
        std::lock_guard<std::mutex> g{mtx_};
        keys_.push_back(key);
        arrivals_.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count());
        status = statuses_[std::min(keys_.size() - 1, statuses_.size() - 1)];
      }
      auto resp = "HTTP/1.1 " + std::to_string(status)
                  + " X\r\nContent-Length: 0\r\n"
                    "Connection: close\r\n\r\n";
      ::send(c, resp.data(), resp.size(), MSG_NOSIGNAL);
      ::close(c);
    }
  }

  std::vector<int> statuses_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  mutable std::mutex mtx_;
  std::vector<std::string> keys_;
  std::vector<int64_t> arrivals_;
  std::thread thread_;
};

} // namespace gost::testing
