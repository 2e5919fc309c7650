// The admin HTTP endpoint on `http.listen`: `/healthz`, `/readyz`, `/metrics`, the web console
// at `/` with its JSON under `/api/` (console/web_api.hpp), `/status` (the configuration) and
// `/blobs/NAME` (rotated images, images.enabled) and `/feeds/errors.csv` (a feed load's
// errors, feed.enabled).

#include <atomic>
#include <fstream>
#include <thread>

#include <caf/event_based_actor.hpp>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>
#include <iterator>

#include "console/feed_export.hpp"
#include "console/web_api.hpp"
#include "gost/core/errc.hpp"
#include "gost/core/kit/writer.hpp"
#include "gost/core/protocol.hpp"
#include "gost/images/worker.hpp"
#include "gost/v1/admin.grpc.pb.h"
#include "node/start.hpp"

namespace gost::runtime {

namespace {

/// The sampler of the web page's plots: one sample of `registry` into `ring` now and then every
/// `every` (console/series.hpp). Reading the registry takes its collectors' short locks only.
caf::actor spawn_sampler(caf::actor_system& sys, std::shared_ptr<const stats_registry> registry,
                         std::shared_ptr<series_ring> ring, std::chrono::milliseconds every) {
  return sys.spawn(
    [](caf::event_based_actor* self, std::shared_ptr<const stats_registry> reg,
       std::shared_ptr<series_ring> r, std::chrono::milliseconds interval) -> caf::behavior {
      r->sample(*reg, kit::now_us());
      self->delayed_send(self, interval, sweep_atom_v);
      return {
        [=](sweep_atom) {
          r->sample(*reg, kit::now_us());
          self->delayed_send(self, interval, sweep_atom_v);
        },
      };
    },
    std::move(registry), std::move(ring), every);
}

} // namespace

caf::error start_http(node_context& n) {
  auto& cfg = n.cfg;
  // The catalog database, then each other shard group's (ADR 0023), Kafka, Redis.
  std::vector<std::shared_ptr<const dependency_tracker>> deps{n.db};
  for (auto& part : n.groups)
    if (part->db != n.db)
      deps.push_back(part->db);
  deps.push_back(n.kafka);
  if (!cfg.images.redis_address.empty())
    deps.push_back(n.redis);
  add_health_metrics(*n.registry, {n.ready, std::move(deps), n.trace_hub});
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
  // A shard group whose database is away: the node stays ready (the other groups serve), and
  // /readyz says which group does not (ADR 0023).
  admin_http::options http_opts;
  std::vector<std::pair<std::string, std::shared_ptr<const dependency_tracker>>> group_dbs;
  for (auto& part : n.groups)
    if (part->db != n.db)
      group_dbs.emplace_back(part->group.name, part->db);
  if (!group_dbs.empty())
    http_opts.degraded = [group_dbs] {
      std::string out;
      for (auto& [name, db] : group_dbs)
        if (!db->up())
          out += "degraded: shard group `" + name + "`: its database (" + db->name()
                 + ") is unreachable; calls for its shards answer UNAVAILABLE (retry)\n";
      return out;
    };
  n.http = std::make_unique<admin_http>([counters] { return counters->prometheus_text(); },
                                        [ready = n.ready] { return ready->check(); },
                                        std::move(http_opts));
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
  // The live trace's HTTP side (/api/trace, the page's "Live trace" panel): a client of this
  // node's own AdminService.Trace, in process (TLS or not on grpc.listen), as the node's own
  // read caller (its internal token, when auth is configured), so the page gets what `gostctl
  // trace` gets — the owner's events from any node, followed across shard moves, within
  // limits.trace_* — with nothing of it written twice. Each event is one JSON line.
  auto channel = n.server->InProcessChannel(grpc::ChannelArguments{});
  trace_hook trace = [channel, token = n.internal_token](const trace_query& q,
                                                         http_stream& out) -> http_response {
    if (q.offer_id.size() > 256) // as /api/offer: no offer id is longer
      return http_error_of({grpc::StatusCode::INVALID_ARGUMENT, "offer must be 1..256 bytes"});
    auto stub = v1::AdminService::NewStub(channel);
    v1::TraceRequest req;
    req.set_offer_id(q.offer_id);
    req.set_max_events(q.max);
    req.set_for_ms(std::chrono::duration_cast<std::chrono::milliseconds>(q.duration).count());
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + q.duration + std::chrono::seconds{5});
    ctx.AddMetadata("authorization", "Bearer " + token);
    auto reader = stub->Trace(&ctx, req);
    // The browser gone (or the listener stopping) ends the call; Read() waits for events.
    std::atomic<bool> done{false};
    std::thread watch{[&] {
      while (!done.load()) {
        if (!out.open()) {
          ctx.TryCancel();
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds{100});
      }
    }};
    bool begun = false;
    v1::TraceEvent e;
    google::protobuf::util::JsonPrintOptions o;
    o.preserve_proto_field_names = true;
    while (reader->Read(&e)) {
      if (!begun && !(begun = out.begin("application/x-ndjson; charset=utf-8")))
        break;
      std::string line;
      (void)google::protobuf::util::MessageToJsonString(e, &line, o);
      if (!out.write(line + "\n")) {
        ctx.TryCancel();
        break;
      }
    }
    done = true;
    watch.join();
    auto st = reader->Finish();
    if (begun)
      return {};
    if (!st.ok() && st.error_code() != grpc::StatusCode::CANCELLED
        && st.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED)
      return http_error_of(st); // a bad offer id, a trace limit, no owner reachable
    // No event within the time: an empty stream.
    out.begin("application/x-ndjson; charset=utf-8");
    return {};
  };
  n.series = std::make_shared<series_ring>(
    cfg.console.sample_count, cfg.console.sample_interval.count(), console_series_rules());
  add_web_console(*n.http, *n.admin, std::move(trace), n.series);
  if (cfg.feeds.enabled) // /feeds/errors.csv (console/feed_export.hpp)
    add_feed_export(*n.http, n.placement);
  // Off loopback, with callers configured (auth.*), every request but the liveness and
  // readiness probes needs a token of role read (all GET: nothing here changes the node).
  if (n.gate && n.gate->rule().enforced() && !config::is_loopback(cfg.http.listen.host))
    n.http->check_access([gate = n.gate](const http_request& req) -> std::pair<int, std::string> {
      auto v = gate->admit_http(role::read, req.path, req.authorization, req.peer);
      if (v.admitted())
        return {0, {}};
      return {v.what == verdict::kind::unauthenticated ? 401 : 403, v.message};
    });
  std::string error;
  n.http_port = n.http->start(cfg.http.listen.host, cfg.http.listen.port, error);
  if (n.http_port == 0) {
    n.http.reset();
    return make_error(errc::invalid_argument, error);
  }
  n.stops.push("admin HTTP", [&n] { n.http.reset(); });
  n.sampler = spawn_sampler(*n.sys, n.registry, n.series, cfg.console.sample_interval);
  n.stops.push("console sampler", [&n] { n.stop_actor(n.sampler); });
  return {};
}

} // namespace gost::runtime
