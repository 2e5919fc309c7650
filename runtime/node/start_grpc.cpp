// The public gRPC API on `grpc.listen`: OfferService, AdminService, StateService,
// EntityService and TaskService (when the node hosts actor types), ImageService (images.enabled),
// FeedService (feed.enabled), ScheduledActionService, server reflection and the health service.

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include "gost/core/errc.hpp"
#include "node/limits.hpp"
#include "node/start.hpp"

namespace gost::runtime {

caf::error start_grpc(node_context& n) {
  auto& cfg = n.cfg;
  auto timeout = cfg.api.request_timeout;
  auto limits = api_limits_of(cfg.limits);
  n.offers = std::make_unique<offer_service>(*n.hub, *n.routes, timeout, limits);
  n.states = std::make_unique<state_service>(*n.hub, *n.routes, timeout, limits);
  n.admin = std::make_unique<admin_service>(
    *n.hub, *n.routes, n.stages, n.stats, timeout,
    admin_service::cluster_view{n.pool.get(), cfg.node.id, cfg.cluster.lease_timeout, n.manager,
                                n.wakes},
    admin_service::access{cfg.console.token, config::is_loopback(cfg.grpc.listen.host),
                          cfg.grpc.listen.to_string()},
    limits, admin_service::types_view{n.ext.entity_types, cfg.history.retention.count() > 0},
    n.traces, cfg.images.enabled ? n.image_stats : nullptr);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  // grpc.health.v1.Health: NOT_SERVING until readiness says otherwise (start_readiness), and
  // once the stop began.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder b;
  b.AddListeningPort(cfg.grpc.listen.to_string(), grpc::InsecureServerCredentials(), &n.grpc_port);
  // A larger request is answered RESOURCE_EXHAUSTED by gRPC itself, before any service sees it
  // ("Received message larger than max (N vs. M)"; docs/api.md, "Limits").
  b.SetMaxReceiveMessageSize(cfg.limits.request_max_bytes);
  // Every call of every service below (reflection and health included) counted by its full
  // method name and status (gost_grpc_requests_total, gost_grpc_request_seconds; api/call.hpp).
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> edge;
  edge.push_back(count_calls(n.counters->calls()));
  b.experimental().SetInterceptorCreators(std::move(edge));
  b.RegisterService(n.offers.get());
  if (n.hosts_entities()) {
    n.entities = std::make_unique<entity_service>(*n.hub, *n.routes, n.ext.entity_types, *n.pool,
                                                  timeout, limits);
    b.RegisterService(n.entities.get());
    n.tasks = std::make_unique<task_service>(
      *n.hub, *n.routes, n.ext.entity_types, *n.pool, timeout, limits,
      task_service::group_defaults{cfg.tasks.retry_delay, cfg.tasks.max_attempts});
    b.RegisterService(n.tasks.get());
  }
  if (cfg.images.enabled) {
    if (!cfg.images.redis_address.empty()) {
      // Shared with the image pools (start_images, stopped before this step's stop).
      images::redis_options ro;
      ro.address = cfg.images.redis_address;
      ro.prefix = cfg.images.redis_prefix;
      ro.connect_timeout = cfg.images.redis_connect_timeout;
      ro.timeout = cfg.images.redis_timeout;
      n.image_cache = std::make_unique<images::redis_cache>(ro, n.redis, n.image_stats.get());
    }
    image_service::settings is;
    is.ttl = cfg.images.ttl;
    is.partitions = cfg.shard.count;
    is.cache = n.image_cache.get();
    is.stats = n.image_stats.get();
    is.queue = n.image_tasks(); // Kafka's, or PostgreSQL's waking the feeders
    n.images = std::make_unique<image_service>(*n.hub, *n.pool, limits, is);
    b.RegisterService(n.images.get());
  }
  if (cfg.feeds.enabled) {
    feed_service::settings fs;
    fs.min_period = cfg.feeds.min_period;
    fs.max_file_bytes = cfg.feeds.max_file_bytes;
    fs.keep_loads = cfg.feeds.keep_loads;
    // The blob store (start_blob_store) is stopped after this step's stop.
    n.feed_api = std::make_unique<feed_service>(*n.hub, *n.pool, *n.blobs, limits, fs);
    b.RegisterService(n.feed_api.get());
  }
  b.RegisterService(n.admin.get());
  b.RegisterService(n.states.get());
  n.scheduled_actions =
    std::make_unique<scheduled_service>(*n.hub, *n.pool, *n.scheduled_api, limits);
  b.RegisterService(n.scheduled_actions.get());
  n.server = b.BuildAndStart();
  if (n.server) {
    // gRPC starts its default health service SERVING: not before readiness says so.
    if (auto* health = n.server->GetHealthCheckService())
      health->SetServingStatus(false);
  }
  auto services = [&n] {
    n.admin.reset();
    n.offers.reset();
    n.states.reset();
    n.entities.reset();
    n.tasks.reset();
    n.images.reset();
    n.image_cache.reset();
    n.scheduled_actions.reset();
    n.feed_api.reset();
  };
  if (!n.server || n.grpc_port == 0) {
    n.server.reset();
    services();
    return make_error(errc::invalid_argument,
                      "cannot listen on grpc.listen=" + cfg.grpc.listen.to_string()
                        + " (address in use or not local?); choose another `grpc.listen`");
  }
  // Stops taking calls; the calls in flight finish until the deadline.
  n.stops.push("gRPC API", [&n, services] {
    if (auto* health = n.server->GetHealthCheckService())
      health->SetServingStatus(false);
    n.traces->stop(); // live traces end now, not at the deadline
    n.server->Shutdown(n.stop_deadline);
    n.server->Wait();
    n.server.reset();
    services();
  });
  return {};
}

} // namespace gost::runtime
