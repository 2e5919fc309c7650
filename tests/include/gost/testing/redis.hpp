#pragma once
// Test support: the redis tier's Redis (`GOST_TEST_REDIS`, set by scripts/test.sh; default the
// loopback server scripts/redis.sh starts), a small synchronous client to look into it, and a
// private redis-server child process a test may kill -9. Tests including this link hiredis.

#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gost/testing/process.hpp"

namespace gost::testing {

inline std::string redis_address() {
  auto e = std::getenv("GOST_TEST_REDIS");
  return e != nullptr ? e : "127.0.0.1:16379";
}

/// One connection; `command` answers a string (a bulk or status reply, or an integer as text),
/// "(nil)" for nil, "(error) ..." for an error, "(down)" when the server cannot be reached.
class redis_client {
public:
  explicit redis_client(const std::string& address) {
    auto colon = address.rfind(':');
    host_ = address.substr(0, colon);
    port_ = std::atoi(address.c_str() + colon + 1);
  }
  ~redis_client() {
    if (ctx_ != nullptr)
      redisFree(ctx_);
  }
  std::string command(std::vector<std::string> args) {
    if (ctx_ == nullptr || ctx_->err != 0) {
      if (ctx_ != nullptr)
        redisFree(ctx_);
      ctx_ = redisConnectWithTimeout(host_.c_str(), port_, timeval{2, 0});
      if (ctx_ == nullptr || ctx_->err != 0)
        return "(down)";
    }
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(
      redisCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data()));
    if (r == nullptr)
      return "(down)";
    std::string out;
    switch (r->type) {
      case REDIS_REPLY_STRING:
      case REDIS_REPLY_STATUS: out.assign(r->str, r->len); break;
      case REDIS_REPLY_INTEGER: out = std::to_string(r->integer); break;
      case REDIS_REPLY_NIL: out = "(nil)"; break;
      case REDIS_REPLY_ERROR: out = "(error) " + std::string{r->str, r->len}; break;
      default: out = "(type " + std::to_string(r->type) + ")";
    }
    freeReplyObject(r);
    return out;
  }

private:
  std::string host_;
  int port_ = 0;
  redisContext* ctx_ = nullptr;
};

/// A port nothing listens on now (bound to 0 and released).
inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

/// A redis-server of the test's own (loopback, nothing saved), killed with the object.
class private_redis {
public:
  private_redis() : port_(free_port()) { start(); }
  void start() {
    proc_ = std::make_unique<child_process>(
      "/usr/bin/redis-server",
      std::vector<std::string>{"--bind", "127.0.0.1", "--port", std::to_string(port_), "--save", "",
                               "--appendonly", "no"});
    redis_client c{address()};
    eventually(std::chrono::seconds{5}, [&] { return c.command({"PING"}) == "PONG"; });
  }
  void kill9() {
    proc_->signal(SIGKILL);
    proc_->wait(std::chrono::seconds{10});
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

private:
  int port_;
  std::unique_ptr<child_process> proc_;
};

} // namespace gost::testing
