// The admin HTTP endpoint on `http.listen`: `/` (a status page), `/healthz`, `/readyz`,
// `/metrics`.

#include "gost/core/errc.hpp"
#include "node/start.hpp"

namespace gost::runtime {

caf::error start_http(node_context& n) {
  auto& cfg = n.cfg;
  auto* counters = n.counters.get();
  auto status_page = [counters, ready = n.ready, node_id = cfg.node.id, grpc_port = n.grpc_port,
                      shards = cfg.shard.count, dump = cfg.config_dump] {
    auto why = ready->check();
    return "<!doctype html><title>gost " + node_id + "</title><h1>gost node " + node_id
           + "</h1><p>gRPC port " + std::to_string(grpc_port) + ", " + std::to_string(shards)
           + " shards, " + (why.empty() ? std::string{"ready"} : "not ready: " + why)
           + ". <a href=\"/metrics\">metrics</a></p><h2>metrics</h2><pre>"
           + counters->prometheus_text() + "</pre><h2>configuration</h2><pre>" + dump + "</pre>";
  };
  n.http = std::make_unique<admin_http>([counters] { return counters->prometheus_text(); },
                                        status_page, [ready = n.ready] { return ready->check(); });
  std::string error;
  n.http_port = n.http->start(cfg.http.listen.host, cfg.http.listen.port, error);
  if (n.http_port == 0) {
    n.http.reset();
    return make_error(errc::invalid_argument, error);
  }
  n.stops.push("admin HTTP", [&n] { n.http.reset(); });
  return {};
}

} // namespace gost::runtime
