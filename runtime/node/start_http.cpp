// The admin HTTP endpoint on `http.listen`: `/healthz`, `/readyz`, `/metrics`, the web console
// at `/` with its JSON under `/api/` (console/web_api.hpp), `/status` (the configuration) and
// `/blobs/NAME` (rotated images, images.enabled).

#include <fstream>
#include <iterator>

#include "console/web_api.hpp"
#include "gost/core/errc.hpp"
#include "gost/images/worker.hpp"
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
  if (cfg.images.enabled) // rotated images (ImageService.Rotate answers their URLs)
    n.http->route(
      "/blobs/", [blobs = images::blob_store{cfg.images.blob_dir, ""}](const http_request& req) {
        auto path = blobs.path_of(req.path.substr(std::string{"/blobs/"}.size()));
        std::ifstream in{path, std::ios::binary};
        if (path.empty() || !in)
          return http_response::text(404, "no such image: " + req.path + "\n");
        std::string body{std::istreambuf_iterator<char>{in}, {}};
        auto ext = req.path.substr(req.path.rfind('.') + 1);
        return http_response{200, ext == "jpg" ? "image/jpeg" : "image/" + ext, std::move(body)};
      });
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
