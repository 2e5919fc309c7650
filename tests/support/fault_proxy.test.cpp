// The fault proxy against a local echo server: each mode on connections open before it and
// made during it, waiting on the proxy's and the server's counters, never on the clock.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gost/testing/fault_proxy.hpp"
#include "gost/testing/process.hpp"

using namespace std::chrono_literals;
using gost::testing::eventually;
using gost::testing::fault_proxy;

namespace {

using clock_type = std::chrono::steady_clock;

/// Echoes every byte back on 127.0.0.1 (a free port), one thread per connection; counts.
class echo_server {
public:
  echo_server() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(listen(fd_, 16) == 0);
    socklen_t len = sizeof addr;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread{[this] {
      for (;;) {
        int c = accept(fd_, nullptr, nullptr);
        if (c < 0)
          return; // the listener was shut down
        ++accepted_;
        workers_.emplace_back([this, c] {
          char buf[4096];
          for (;;) {
            auto n = read(c, buf, sizeof buf);
            if (n <= 0)
              break;
            received_ += static_cast<size_t>(n);
            if (write(c, buf, static_cast<size_t>(n)) != n)
              break;
          }
          close(c);
          ++closed_;
        });
      }
    }};
  }
  ~echo_server() {
    shutdown(fd_, SHUT_RDWR);
    acceptor_.join();
    for (auto& w : workers_)
      w.join(); // each ends when the proxy closes its side (the proxy is destroyed first)
    close(fd_);
  }
  int port() const { return port_; }
  size_t accepted() const { return accepted_; }
  size_t received() const { return received_; }
  size_t closed() const { return closed_; } ///< connections that ended (EOF or reset)

private:
  int fd_ = -1;
  int port_ = 0;
  std::atomic<size_t> accepted_{0};
  std::atomic<size_t> received_{0};
  std::atomic<size_t> closed_{0};
  std::vector<std::thread> workers_;
  std::thread acceptor_;
};

/// A client socket connected to `port`; closed on destruction.
struct client {
  int fd = -1;
  explicit client(int port) {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  }
  ~client() { close(fd); }

  void send_all(const std::string& bytes) {
    REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL)
            == static_cast<ssize_t>(bytes.size()));
  }

  /// `n` bytes, or fewer when the connection ended or 10 s passed without a byte.
  std::string receive(size_t n) {
    std::string out;
    char buf[4096];
    while (out.size() < n) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 10'000) <= 0)
        break;
      auto r = read(fd, buf, std::min(sizeof buf, n - out.size()));
      if (r <= 0)
        break;
      out.append(buf, static_cast<size_t>(r));
    }
    return out;
  }

  /// Whether the connection ends (EOF or reset) within 10 s; bytes before it are skipped.
  bool ends() {
    char buf[4096];
    for (;;) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 10'000) <= 0)
        return false;
      if (read(fd, buf, sizeof buf) <= 0)
        return true;
    }
  }

  /// Whether a byte or the end is waiting now (no wait).
  bool readable_now() {
    pollfd p{fd, POLLIN, 0};
    return poll(&p, 1, 0) > 0;
  }
};

} // namespace

TEST_CASE("fault proxy: pass forwards both ways and counts") {
  echo_server echo;
  fault_proxy proxy{"127.0.0.1", echo.port()};
  CHECK(proxy.current() == fault_proxy::mode::pass);
  client c{proxy.port()};
  c.send_all("hello");
  CHECK(c.receive(5) == "hello");
  CHECK(proxy.accepted() == 1);
  CHECK(proxy.open() == 1);
  // Counted once written: the echo may arrive before the count.
  CHECK(eventually(5s, [&] { return proxy.forwarded() == 10; }));
  CHECK(echo.accepted() == 1);
}

TEST_CASE("fault proxy: latency delays each direction by its own amount") {
  echo_server echo;
  fault_proxy proxy{"127.0.0.1", echo.port()};
  client c{proxy.port()};
  c.send_all("x");
  REQUIRE(c.receive(1) == "x");
  proxy.latency(150ms, 100ms);
  auto start = clock_type::now();
  c.send_all("ping");
  CHECK(c.receive(4) == "ping");
  auto took = clock_type::now() - start;
  CHECK(took >= 250ms); // both directions' delay, on a connection opened before
  // The order within a direction is kept while bytes wait.
  std::string many;
  for (int i = 0; i < 100; ++i)
    many += std::to_string(i) + ",";
  for (size_t i = 0; i < many.size(); i += 7)
    c.send_all(many.substr(i, 7));
  CHECK(c.receive(many.size()) == many);
}

TEST_CASE("fault proxy: a bandwidth limit spreads the bytes over time") {
  echo_server echo;
  fault_proxy proxy{"127.0.0.1", echo.port()};
  proxy.bandwidth(40'000);
  client c{proxy.port()};
  std::string bytes(8'000, 'b');
  auto start = clock_type::now();
  c.send_all(bytes);
  CHECK(c.receive(bytes.size()) == bytes);
  CHECK(clock_type::now() - start >= 190ms); // 8 000 bytes at 40 000 a second, each way
  proxy.pass();
  c.send_all("fast");
  CHECK(c.receive(4) == "fast");
}

TEST_CASE("fault proxy: a cut resets open connections and refuses new ones until healed") {
  echo_server echo;
  fault_proxy proxy{"127.0.0.1", echo.port()};
  client before{proxy.port()};
  before.send_all("a");
  REQUIRE(before.receive(1) == "a");

  // A child process forked meanwhile (a test starts gostd while the proxy runs) inherits no
  // socket of the proxy's: one it held would outlive the reset.
  gost::testing::child_process child{"/bin/sleep", {"60"}};

  proxy.cut();
  CHECK(before.ends());
  CHECK(eventually(5s, [&] { return echo.closed() == 1; })); // the server's side too
  CHECK(proxy.resets() == 1);
  CHECK(eventually(5s, [&] { return proxy.open() == 0; }));

  client during{proxy.port()}; // the port still accepts: the connection is reset at once
  CHECK(during.ends());
  CHECK(eventually(5s, [&] { return proxy.refused() == 1; }));
  CHECK(echo.accepted() == 1); // nothing reached the server

  proxy.pass();
  client after{proxy.port()};
  after.send_all("b");
  CHECK(after.receive(1) == "b");
  CHECK(echo.accepted() == 2);
}

TEST_CASE("fault proxy: half-open keeps connections and drops every byte, without a reset") {
  echo_server echo;
  fault_proxy proxy{"127.0.0.1", echo.port()};
  client before{proxy.port()};
  before.send_all("a");
  REQUIRE(before.receive(1) == "a");
  auto received = echo.received();

  proxy.blackhole();
  before.send_all(std::string(100, 'x'));
  CHECK(eventually(5s, [&] { return proxy.dropped() >= 100; }));
  client during{proxy.port()}; // accepted, and kept
  during.send_all("yyyy");
  CHECK(eventually(5s, [&] { return proxy.dropped() >= 104; }));
  CHECK(proxy.accepted() == 2);
  CHECK(proxy.open() == 2);
  CHECK(proxy.resets() == 0);
  CHECK(echo.received() == received); // nothing went through
  CHECK_FALSE(before.readable_now()); // no answer, no end: the client cannot tell
  CHECK_FALSE(during.readable_now());

  proxy.pass();
  before.send_all("c");
  CHECK(before.receive(1) == "c"); // the same connection forwards again
  during.send_all("d");
  CHECK(during.receive(1) == "d");
}
