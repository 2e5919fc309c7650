#include "console/metrics.hpp"

#include "api/readiness.hpp"
#include "gost/config/node_config.hpp"
#include "gost/core/allocator.hpp"
#include "gost/core/dependency.hpp"
#include "rpc/parse_guard.hpp"

namespace gost::runtime {

metrics::metrics(std::shared_ptr<stats_registry> registry, build_info build)
  : registry_(std::move(registry)) {
  if (!build.app.empty())
    registry_->add([b = std::move(build)](metric_families& out) {
      out.add("gost_build_info", stat_kind::gauge,
              "Always 1: the application this node runs (gostd or one built with node_builder), "
              "its version, gost's, and the allocator serving malloc.",
              {{"app", b.app},
               {"version", b.version},
               {"gost_version", config::gost_version()},
               {"allocator", allocator_name()}},
              1);
    });
  registry_->add([calls = calls_](metric_families& out) {
    calls->collect(out);
    out.add("gost_grpc_undecodable_requests_total", stat_kind::counter,
            "Requests whose bytes were not their method's message (answered INVALID_ARGUMENT).", {},
            static_cast<int64_t>(rpc::undecodable_requests()));
  });
}

void add_health_metrics(stats_registry& reg, health_sources health) {
  reg.add([h = std::move(health)](metric_families& out) {
    if (h.traces) {
      out.add("gost_console_traces_active", stat_kind::gauge,
              "Live traces this node serves now (gostctl trace, and other nodes' traces of "
              "offers it owns).",
              {}, static_cast<int64_t>(h.traces->serving.load()));
      out.add("gost_console_trace_subscriptions", stat_kind::gauge,
              "Subscriptions to this node's trace hub: while 0, an actor's event pays one "
              "relaxed load for tracing.",
              {}, static_cast<int64_t>(h.traces->subscriptions()));
    }
    if (h.ready)
      out.add("gost_ready", stat_kind::gauge,
              "1 while the node takes calls (readiness: /readyz, gRPC health), else 0.", {},
              h.ready->ready() ? 1 : 0);
    for (auto& d : h.dependencies)
      out.add("gost_dependency_up", stat_kind::gauge,
              "1 while the dependency answered the last call that reached for it, else 0.",
              {{"dependency", d->name()}}, d->up() ? 1 : 0);
    for (auto& d : h.dependencies)
      out.add("gost_dependency_failed_calls_total", stat_kind::counter,
              "Calls that could not reach the dependency.", {{"dependency", d->name()}},
              static_cast<int64_t>(d->failed_calls()));
  });
}

} // namespace gost::runtime
