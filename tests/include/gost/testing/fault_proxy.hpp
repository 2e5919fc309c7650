#pragma once
// Test support: a TCP proxy a test puts between two parts (a gostd and PostgreSQL) and breaks
// on demand from its own process: added latency per direction, a cut, a half-open connection,
// a bandwidth limit. Debian packages no toxiproxy; this is the small part of it the fault
// tests need (tests/e2e/netfault.e2etest.cpp), on one thread of its own.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace gost::testing {

class fault_proxy {
public:
  /// What the proxy does to the connections, the ones open and the ones to come.
  enum class mode {
    pass,     ///< bytes forwarded (after the latency and within the bandwidth set)
    cut,      ///< open connections reset (RST), new ones accepted and reset at once
    blackhole ///< half-open: connections accepted and kept, every byte dropped, no reset
  };

  /// Listens on `listen_host`:`listen_port` (0: a free port) and forwards each accepted
  /// connection to `upstream_host`:`upstream_port` (IPv4 addresses). Any 127.x.y.z is this
  /// host's loopback: a proxy on 127.0.0.2:P can stand for a server on 127.0.0.1:P, which is
  /// how a node's link is proxied (the node advertises the host; tests/e2e/netfault). Throws
  /// std::runtime_error when it cannot listen.
  fault_proxy(std::string upstream_host, int upstream_port, int listen_port = 0,
              const std::string& listen_host = "127.0.0.1");
  ~fault_proxy();
  fault_proxy(const fault_proxy&) = delete;
  fault_proxy& operator=(const fault_proxy&) = delete;

  int port() const { return port_; }

  // Each change is applied to the open connections before the call returns.

  /// Forwards again, without added latency or limit. Connections that were half-open stay
  /// open and forward the bytes that come from now on (those dropped are lost).
  void pass();
  /// Every byte from the client waits `to_upstream` before it is forwarded, every byte from
  /// upstream `to_client`; the order within a direction is kept.
  void latency(std::chrono::milliseconds to_upstream, std::chrono::milliseconds to_client);
  /// At most `bytes_per_second` in each direction of each connection (0: no limit).
  void bandwidth(std::size_t bytes_per_second);
  /// Resets every open connection and every new one until `pass`.
  void cut();
  /// Keeps connections open and accepts new ones, dropping every byte until `pass`.
  void blackhole();

  mode current() const;

  // What happened, for tests to wait on.
  std::size_t accepted() const { return accepted_; }     ///< connections forwarded
  std::size_t refused() const { return refused_; }       ///< connections reset on accept
  std::size_t open() const { return open_; }             ///< connections open now
  std::size_t resets() const { return resets_; }         ///< open connections reset by `cut`
  std::uint64_t forwarded() const { return forwarded_; } ///< bytes written, both directions
  std::uint64_t dropped() const { return dropped_; }     ///< bytes dropped while half-open
  std::uint64_t queued() const { return queued_; }       ///< bytes read, not yet written

private:
  struct settings {
    mode m = mode::pass;
    std::chrono::milliseconds to_upstream{0};
    std::chrono::milliseconds to_client{0};
    std::size_t bytes_per_second = 0;
  };
  void set(const settings& s);
  void run();

  std::string upstream_host_;
  int upstream_port_;
  int port_ = 0;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1}; ///< a pipe: a settings change or the stop wakes the thread

  mutable std::mutex mtx_;
  settings settings_;            ///< guarded by mtx_
  std::uint64_t generation_ = 0; ///< guarded by mtx_: bumped by every change
  std::uint64_t applied_ = 0;    ///< guarded by mtx_: the generation the thread applied
  std::condition_variable applied_cv_;
  std::atomic<bool> stop_{false};
  std::atomic<std::size_t> accepted_{0};
  std::atomic<std::size_t> refused_{0};
  std::atomic<std::size_t> open_{0};
  std::atomic<std::size_t> resets_{0};
  std::atomic<std::uint64_t> forwarded_{0};
  std::atomic<std::uint64_t> dropped_{0};
  std::atomic<std::uint64_t> queued_{0};
  std::thread thread_; // last: runs on everything above
};

} // namespace gost::testing
