// The admin HTTP endpoint on `http.listen`: `/healthz`, `/readyz`, `/metrics`, the web console
// at `/` with its JSON under `/api/` (console/web_api.hpp), and `/status` (the configuration).

#include "console/web_api.hpp"
#include "gost/core/errc.hpp"
#include "node/start.hpp"

namespace gost::runtime {

caf::error start_http(node_context& n) {
  auto& cfg = n.cfg;
  auto* counters = n.counters.get();
  auto status_page = [counters, ready = n.ready, node_id = cfg.node.id, grpc_port = n.grpc_port,
                      shards = cfg.shard.count, dump = cfg.config_dump](const http_request&) {
    auto why = ready->check();
    return http_response{
      200, "text/html; charset=utf-8",
      "<!doctype html><title>gost " + node_id + "</title><h1>gost node " + node_id
        + "</h1><p>gRPC port " + std::to_string(grpc_port) + ", " + std::to_string(shards)
        + " shards, " + (why.empty() ? std::string{"ready"} : "not ready: " + why)
        + ". <a href=\"/\">console</a>, <a href=\"/metrics\">metrics</a></p><h2>metrics</h2><pre>"
        + counters->prometheus_text() + "</pre><h2>configuration</h2><pre>" + dump + "</pre>"};
  };
  n.http = std::make_unique<admin_http>([counters] { return counters->prometheus_text(); },
                                        [ready = n.ready] { return ready->check(); });
  n.http->route("/status", status_page);
  // TRACE HOOK: the live trace's HTTP side (/api/trace, the page's "Live trace" panel). Until
  // a trace_hook is given here (console/web_api.hpp: stream one offer's events as JSON lines),
  // /api/trace answers 501 "trace not available on this node".
  trace_hook trace;
  add_web_console(*n.http, *n.admin, std::move(trace));
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
