// Readiness (api/readiness.hpp): the last step of the start order, so its stop is the first —
// at SIGTERM the node says it is not ready before it hands its shards off and drains.

#include <grpcpp/health_check_service_interface.h>

#include "node/start.hpp"

namespace gost::runtime {

caf::error start_readiness(node_context& n) {
  // The gRPC health service answers for the whole server (service ""), which is what a
  // balancer asks; every service of the API is ready or not together.
  auto* health = n.server->GetHealthCheckService();
  n.ready->start(
    routes_gate(n.routes),
    [health](bool ready, const std::string&) {
      if (health != nullptr)
        health->SetServingStatus(ready);
    },
    std::chrono::milliseconds{100});
  n.stops.push("readiness", [&n] { n.ready->stop(); });
  return {};
}

} // namespace gost::runtime
