#pragma once
// The node's /metrics: the Prometheus text of its stats registry (gost/core/stats_registry.hpp),
// into which every part registers what it counts as it starts (node/start_*.cpp). This folder
// adds the node's own figures: gRPC calls (grpc_stats, counted at the request edge, api/call.hpp)
// and health (readiness, dependencies, live traces).

#include <memory>
#include <string>
#include <vector>

#include "api/call.hpp"
#include "gost/core/kit/trail.hpp"
#include "gost/core/stats_registry.hpp"

namespace gost {
class dependency_tracker;
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
};

/// Registers the health figures (start_http: from the first /metrics on).
void add_health_metrics(stats_registry& reg, health_sources health);

/// Who runs the node (`gost_build_info`): the application (node_builder::name) and its version.
struct build_info {
  std::string app;
  std::string version;
};

class metrics {
public:
  /// Registers the gRPC figures (gost_grpc_*) and, with an application's name, `gost_build_info`
  /// into `registry`.
  explicit metrics(std::shared_ptr<stats_registry> registry, build_info build = {});

  /// Counted by the gRPC server's interceptors (count_calls, node/start_grpc.cpp).
  const std::shared_ptr<grpc_stats>& calls() const noexcept { return calls_; }
  stats_registry& registry() noexcept { return *registry_; }

  std::string prometheus_text() const { return registry_->prometheus_text(); }

private:
  std::shared_ptr<grpc_stats> calls_ = std::make_shared<grpc_stats>();
  std::shared_ptr<stats_registry> registry_;
};

} // namespace gost::runtime
