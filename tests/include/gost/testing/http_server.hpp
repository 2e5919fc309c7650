#pragma once
// Test support: a small HTTP/1.1 server on 127.0.0.1 (a free port) answering each request
// from a handler on a thread of its own, one request per connection. A handler may ask to
// hang (accept, read, never answer) until the server stops: a server that never answers.
// Or scripted: `http_server srv{{503, 503, 200}}` answers the statuses in turn (the last one
// repeated), as an endpoint failing twice then succeeding. Every request's Idempotency-Key and
// arrival time are recorded.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace gost::testing {

class http_server {
public:
  struct call {
    std::string method;
    std::string path;                           ///< with the query
    std::map<std::string, std::string> headers; ///< names lower-cased
    std::string body;
  };
  struct reply {
    int status = 200;
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;
    bool hang = false; ///< never answer (until the server stops)
  };
  using handler = std::function<reply(const call&)>;

  /// Answers the statuses in turn (the last one repeated), with an empty body.
  explicit http_server(std::vector<int> statuses)
    : http_server(
      [statuses = std::move(statuses), n = std::make_shared<std::atomic<size_t>>(0)](const call&) {
        auto i = std::min(n->fetch_add(1), statuses.size() - 1);
        return reply{statuses[i], {}};
      }) {}

  explicit http_server(handler h) : handler_(std::move(h)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd_, 64);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~http_server() {
    stopping_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    acceptor_.join();
    {
      std::lock_guard<std::mutex> g{m_};
      for (int c : open_)
        ::shutdown(c, SHUT_RDWR);
    }
    for (auto& t : workers_)
      t.join();
  }
  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  uint16_t port() const { return port_; }
  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  /// The scripted endpoint's URL.
  std::string url() const { return url("/hook"); }
  /// Requests read so far.
  int requests() const { return requests_.load(); }
  /// The Idempotency-Key of each request so far, in arrival order ("" when it had none).
  std::vector<std::string> keys() const {
    std::lock_guard<std::mutex> g{m_};
    return keys_;
  }
  /// When each request arrived (system clock, ms since the epoch).
  std::vector<int64_t> arrivals() const {
    std::lock_guard<std::mutex> g{m_};
    return arrivals_;
  }

private:
  void accept_loop() {
    for (;;) {
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) {
        if (stopping_)
          return;
        continue;
      }
      std::lock_guard<std::mutex> g{m_};
      open_.push_back(c);
      workers_.emplace_back([this, c] { serve(c); });
    }
  }
  void serve(int c) {
    std::string in;
    char buf[8192];
    size_t head_end;
    while ((head_end = in.find("\r\n\r\n")) == std::string::npos) {
      auto n = ::recv(c, buf, sizeof buf, 0);
      if (n <= 0)
        return finish(c);
      in.append(buf, static_cast<size_t>(n));
    }
    call req;
    auto line_end = in.find("\r\n");
    auto first = in.substr(0, line_end);
    auto sp1 = first.find(' '), sp2 = first.rfind(' ');
    req.method = first.substr(0, sp1);
    req.path = first.substr(sp1 + 1, sp2 - sp1 - 1);
    for (size_t pos = line_end + 2; pos < head_end;) {
      auto end = in.find("\r\n", pos);
      auto line = in.substr(pos, end - pos);
      auto colon = line.find(':');
      if (colon != std::string::npos) {
        auto name = line.substr(0, colon);
        for (auto& ch : name)
          ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        auto value = line.substr(colon + 1);
        value.erase(0, value.find_first_not_of(' '));
        req.headers[name] = value;
      }
      pos = end + 2;
    }
    req.body = in.substr(head_end + 4);
    size_t want =
      req.headers.count("content-length") ? std::stoul(req.headers["content-length"]) : 0;
    while (req.body.size() < want) {
      auto n = ::recv(c, buf, sizeof buf, 0);
      if (n <= 0)
        return finish(c);
      req.body.append(buf, static_cast<size_t>(n));
    }
    {
      std::lock_guard<std::mutex> g{m_};
      auto k = req.headers.find("idempotency-key");
      keys_.push_back(k == req.headers.end() ? std::string{} : k->second);
      arrivals_.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count());
    }
    ++requests_;
    auto rep = handler_(req);
    if (rep.hang) {
      while (!stopping_ && ::recv(c, buf, sizeof buf, 0) > 0) {
      }
      return finish(c);
    }
    std::string out = "HTTP/1.1 " + std::to_string(rep.status) + " X\r\nConnection: close\r\n"
                      + "Content-Length: " + std::to_string(rep.body.size()) + "\r\n";
    for (auto& [k, v] : rep.headers)
      out += k + ": " + v + "\r\n";
    out += "\r\n" + rep.body;
    for (size_t sent = 0; sent < out.size();) {
      auto n = ::send(c, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
      if (n <= 0)
        break;
      sent += static_cast<size_t>(n);
    }
    finish(c);
  }
  void finish(int c) {
    std::lock_guard<std::mutex> g{m_};
    for (auto& o : open_)
      if (o == c)
        o = -1;
    ::close(c);
  }

  handler handler_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> requests_{0};
  std::thread acceptor_;
  mutable std::mutex m_;
  std::vector<int> open_;
  std::vector<std::string> keys_;
  std::vector<int64_t> arrivals_;
  std::vector<std::thread> workers_;
};

} // namespace gost::testing
