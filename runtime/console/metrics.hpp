#pragma once
// The node's counters in Prometheus' text format. Counters are relaxed atomics updated on
// the request path; rendering reads them without locks.

#include <memory>
#include <string>

#include "api/call_stats.hpp"
#include "gost/core/stats.hpp"

namespace gost::runtime {

class metrics {
public:
  explicit metrics(std::shared_ptr<node_stats> actors) : actors_(std::move(actors)) {}

  /// Counted by the gRPC services.
  call_stats& calls() noexcept { return calls_; }

  std::string prometheus_text() const;

private:
  call_stats calls_;
  std::shared_ptr<node_stats> actors_;
};

} // namespace gost::runtime
