#pragma once
// The node's small admin HTTP endpoint on http.listen: /healthz (liveness: the process
// answers), /readyz (readiness: 200, or 503 with the reason), /metrics (Prometheus text) and
// / (a status page). One thread, one request per connection: it is for operators, probes and
// scrapers, not for traffic.

#include <atomic>
#include <functional>
#include <string>
#include <thread>

namespace gost::runtime {

class admin_http {
public:
  using page_fn = std::function<std::string()>;

  /// `not_ready`: why the node should not get calls, empty when it should (api/readiness.hpp).
  admin_http(page_fn metrics, page_fn status, page_fn not_ready)
    : metrics_(std::move(metrics)), status_(std::move(status)), not_ready_(std::move(not_ready)) {}
  ~admin_http() { stop(); }

  /// Binds and starts serving; returns the bound port, or 0 and sets `error`.
  uint16_t start(const std::string& host, uint16_t port, std::string& error);
  void stop();

private:
  void serve();
  void handle(int fd);

  page_fn metrics_;
  page_fn status_;
  page_fn not_ready_;
  int listen_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

} // namespace gost::runtime
