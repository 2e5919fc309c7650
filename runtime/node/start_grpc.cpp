// The public gRPC API on `grpc.listen`: OfferService, AdminService, StateService,
// EntityService and TaskService (when the node hosts actor types), ImageService (images.enabled),
// FeedService (feed.enabled), ScheduledActionService, server reflection and the health service;
// TLS when `grpc.tls_cert` is set, and every service behind the caller gate (api/call_gate.hpp).

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include <optional>
#include <random>
#include <tuple>

#include "gost/core/errc.hpp"
#include "node/limits.hpp"
#include "node/start.hpp"

namespace gost::runtime {

namespace {

/// 32 random hex digits (the node's own token: never written anywhere).
std::string random_token() {
  std::random_device rd;
  std::string out;
  const char* hex = "0123456789abcdef";
  for (int i = 0; i < 32; ++i)
    out += hex[rd() % 16];
  return out;
}

/// The caller rule of the configuration (`auth.*`, `console.token`); the problem, naming the
/// key, in `error`.
std::optional<caller_rule> rule_of(const config::node_config& cfg,
                                   const std::string& internal_token, std::string& error) {
  caller_rule::settings s;
  error = caller_rule::parse_tokens(cfg.auth.tokens, "auth.tokens", s.tokens);
  if (error.empty() && !cfg.auth.tokens_file.empty()) {
    std::string text;
    error = read_pem_file(cfg.auth.tokens_file, text);
    if (!error.empty())
      error = "auth.tokens_file: " + error;
    else
      error = caller_rule::parse_tokens(text, "auth.tokens_file " + cfg.auth.tokens_file, s.tokens);
  }
  if (error.empty())
    error = caller_rule::parse_cert_roles(cfg.auth.cert_roles, "auth.cert_roles", s.cert_roles);
  if (!error.empty())
    return std::nullopt;
  s.console_token = cfg.console.token;
  s.internal_token = internal_token;
  s.loopback = config::is_loopback(cfg.grpc.listen.host);
  s.listen = cfg.grpc.listen.to_string();
  return caller_rule{std::move(s)};
}

/// TLS on `grpc.listen` when `grpc.tls_cert` is set (client certificates with
/// `grpc.tls_client_ca`), else plaintext.
std::shared_ptr<grpc::ServerCredentials> credentials_of(const config::grpc_config& g,
                                                        std::string& error) {
  if (g.tls_cert.empty())
    return grpc::InsecureServerCredentials();
  std::string cert, key, ca;
  for (auto [k, path, dst] : {std::tuple{"grpc.tls_cert", &g.tls_cert, &cert},
                              std::tuple{"grpc.tls_key", &g.tls_key, &key},
                              std::tuple{"grpc.tls_client_ca", &g.tls_client_ca, &ca}})
    if (!path->empty())
      if (auto err = read_pem_file(*path, *dst); !err.empty()) {
        error = "gRPC TLS: " + err + "; check `" + k + "` (a PEM file)";
        return nullptr;
      }
  grpc::SslServerCredentialsOptions o{ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                      : g.tls_client_auth == "required"
                                        ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                        : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY};
  o.pem_root_certs = ca;
  o.pem_key_cert_pairs.push_back({key, cert});
  return grpc::SslServerCredentials(o);
}

} // namespace

caf::error start_grpc(node_context& n) {
  auto& cfg = n.cfg;
  std::string problem;
  n.internal_token = random_token();
  auto rule = rule_of(cfg, n.internal_token, problem);
  if (!rule)
    return make_error(errc::invalid_argument, problem);
  auto creds = credentials_of(cfg.grpc, problem);
  if (!creds)
    return make_error(errc::invalid_argument, problem);
  n.gate = std::make_shared<caller_gate>(std::move(*rule), n.counters->calls());
  auto timeout = cfg.api.request_timeout;
  auto limits = api_limits_of(cfg.limits);
  n.offers = std::make_unique<offer_service>(*n.hub, *n.routes, timeout, limits);
  n.states = std::make_unique<state_service>(*n.hub, *n.routes, timeout, limits);
  admin_service::cluster_view view;
  view.pool = n.pool.get();
  view.node_id = cfg.node.id;
  view.lease_timeout = cfg.cluster.lease_timeout;
  view.manager = n.manager;
  view.wakes = n.wakes;
  view.placement = n.placement; // each group's pool
  n.admin = std::make_unique<admin_service>(
    *n.hub, *n.routes, n.stages, n.stats, timeout, std::move(view), limits,
    admin_service::types_view{n.ext.entity_types, cfg.history.retention.count() > 0}, n.traces,
    cfg.images.enabled ? n.image_stats : nullptr);
  // Shard moves asked of this node (gostctl move-shards, ADR 0023): weak, the service goes
  // before the registry.
  n.registry->add([weak = std::weak_ptr<const admin_service::move_figures>(n.admin->move_counts())](
                    metric_families& out) {
    auto m = weak.lock();
    if (!m)
      return;
    auto get = [](const std::atomic<uint64_t>& a) {
      return static_cast<int64_t>(a.load(std::memory_order_relaxed));
    };
    const char* moves = "gost_shard_moves_total";
    const char* moves_help = "Shard moves asked of this node (gostctl move-shards), by outcome: "
                             "done, failed (ask again to resume), refused (nothing written).";
    out.add(moves, stat_kind::counter, moves_help, {{"outcome", "done"}}, get(m->done));
    out.add(moves, stat_kind::counter, moves_help, {{"outcome", "failed"}}, get(m->failed));
    out.add(moves, stat_kind::counter, moves_help, {{"outcome", "refused"}}, get(m->refused));
    const char* rows = "gost_shard_move_rows_total";
    const char* rows_help = "Rows the shard moves of this node wrote to their targets: copied "
                            "(first pass), caught_up (changed meanwhile, from the change log), "
                            "queued (outbox batches, parked rows, dead letters moved).";
    out.add(rows, stat_kind::counter, rows_help, {{"step", "copied"}}, get(m->rows_copied));
    out.add(rows, stat_kind::counter, rows_help, {{"step", "caught_up"}}, get(m->rows_caught_up));
    out.add(rows, stat_kind::counter, rows_help, {{"step", "queued"}}, get(m->queued_moved));
    out.add("gost_shard_moves_running", stat_kind::gauge,
            "Shard moves running on this node now (at most one in the installation).", {},
            static_cast<int64_t>(m->running.load(std::memory_order_relaxed)));
    if (auto ms = m->last_fence_ms.load(std::memory_order_relaxed); ms >= 0)
      out.add("gost_shard_move_last_fence_seconds", metric_type::gauge,
              "How long the last finished move's range was fenced (no writes: its calls answered "
              "UNAVAILABLE, retry), from the fence to the map's switch.",
              {}, static_cast<double>(ms) / 1000.0);
  });
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  // grpc.health.v1.Health: NOT_SERVING until readiness says otherwise (start_readiness), and
  // once the stop began.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder b;
  b.AddListeningPort(cfg.grpc.listen.to_string(), creds, &n.grpc_port);
  // A larger request is answered RESOURCE_EXHAUSTED by gRPC itself, before any service sees it
  // ("Received message larger than max (N vs. M)"; docs/api.md, "Limits").
  b.SetMaxReceiveMessageSize(cfg.limits.request_max_bytes);
  // Every call of every service below (reflection and health included) counted by its full
  // method name and status (gost_grpc_requests_total, gost_grpc_request_seconds; api/call.hpp).
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> edge;
  edge.push_back(count_calls(n.counters->calls()));
  b.experimental().SetInterceptorCreators(std::move(edge));
  n.offers->set_gate(n.gate);
  b.RegisterService(n.offers.get());
  if (n.hosts_entities()) {
    n.entities = std::make_unique<entity_service>(*n.hub, *n.routes, n.ext.entity_types,
                                                  n.placement, timeout, limits);
    n.entities->set_gate(n.gate);
    b.RegisterService(n.entities.get());
    n.tasks = std::make_unique<task_service>(
      *n.hub, *n.routes, n.ext.entity_types, *n.pool, n.placement, timeout, limits,
      task_service::group_defaults{cfg.tasks.retry_delay, cfg.tasks.max_attempts});
    n.tasks->set_gate(n.gate);
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
    is.cache = n.image_cache.get();
    is.stats = n.image_stats.get();
    is.queue = n.image_tasks(); // Kafka's, or PostgreSQL's waking the feeders
    n.images = std::make_unique<image_service>(*n.hub, n.placement, limits, is);
    n.images->set_gate(n.gate);
    b.RegisterService(n.images.get());
  }
  if (cfg.feeds.enabled) {
    feed_service::settings fs;
    fs.min_period = cfg.feeds.min_period;
    fs.max_file_bytes = cfg.feeds.max_file_bytes;
    fs.keep_loads = cfg.feeds.keep_loads;
    // The blob store (start_blob_store) is stopped after this step's stop.
    n.feed_api = std::make_unique<feed_service>(*n.hub, n.placement, *n.blobs, limits, fs);
    n.feed_api->set_gate(n.gate);
    b.RegisterService(n.feed_api.get());
  }
  n.admin->set_gate(n.gate);
  b.RegisterService(n.admin.get());
  n.states->set_gate(n.gate);
  b.RegisterService(n.states.get());
  n.scheduled_actions = std::make_unique<scheduled_service>(*n.hub, *n.scheduled_api, limits);
  n.scheduled_actions->set_gate(n.gate);
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
