#pragma once
// The node's counters in Prometheus' text format. Counters are relaxed atomics updated on
// the request path; rendering reads them without locks.

#include <memory>
#include <string>
#include <vector>

#include "api/call_stats.hpp"
#include "gost/core/kit/trail.hpp"
#include "gost/core/stats.hpp"

namespace gost {
class dependency_tracker;
}

namespace gost::images {
struct image_stats;
}

namespace gost::feeds {
struct feed_stats;
}

namespace gost::runtime {

class readiness;

/// What the health figures read: readiness (`gost_ready`), the trackers of the node's
/// dependencies (`gost_dependency_up`, `gost_dependency_failed_calls_total`) and the live
/// traces. Any may be missing.
struct health_sources {
  std::shared_ptr<readiness> ready;
  std::vector<std::shared_ptr<const dependency_tracker>> dependencies;
  /// Live traces (`gost_console_traces_active`, `gost_console_trace_subscriptions`).
  std::shared_ptr<const kit::trace_hub> traces;
  /// The image functions (`gost_image_*`), when the node runs them.
  std::shared_ptr<const images::image_stats> images;
  /// The feed processor (`gost_feed_*`), when the node runs it (feed.enabled).
  std::shared_ptr<const feeds::feed_stats> feeds;
};

/// Who runs the node (`gost_build_info`): the application (node_builder::name) and its version.
struct build_info {
  std::string app;
  std::string version;
};

class metrics {
public:
  explicit metrics(std::shared_ptr<node_stats> actors, health_sources health = {},
                   build_info build = {})
    : actors_(std::move(actors)), health_(std::move(health)), build_(std::move(build)) {}

  /// Counted by the gRPC services.
  call_stats& calls() noexcept { return calls_; }

  std::string prometheus_text() const;

private:
  call_stats calls_;
  std::shared_ptr<node_stats> actors_;
  health_sources health_;
  build_info build_;
};

} // namespace gost::runtime
