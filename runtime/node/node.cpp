#include "gost/runtime/node.hpp"

#include <algorithm>
#include <csignal>
#include <thread>
#include <fstream>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/exit_reason.hpp>
#include <caf/scoped_actor.hpp>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>

#include "gost/core/log.hpp"
#include "console/admin_http.hpp"
#include "api/admin_service.hpp"
#include "node/embedded_pg.hpp"
#include "gost/offers/builtin_stages.hpp"
#include "gost/offers/spawn.hpp"
#include "gost/persistence/pg_pool.hpp"
#include "gost/persistence/schema.hpp"
#include "gost/persistence/offers/write_behind.hpp"
#include "node/logging.hpp"
#include "console/metrics.hpp"
#include "kafka/after_save.hpp"
#include "api/external_stage.hpp"
#include "kafka/feed_exchange.hpp"
#include "cluster/node_link.hpp"
#include "api/entity_service.hpp"
#include "api/offer_service.hpp"
#include "api/state_service.hpp"
#include "cluster/router.hpp"
#include "rpc/parse_guard.hpp"
#include "gost/core/call_hub.hpp"
#include "gost/core/entity/spawn.hpp"
#include "cluster/manager.hpp"
#include "kafka/outbox_relay.hpp"
#include "gost/persistence/cluster/leases.hpp"

namespace gost::runtime {

namespace {

const auto lg = gost::log::get("node");

} // namespace

using persistence::error_message;

struct node::impl {
  config::node_config cfg;
  extensions ext; ///< the application's stages and actor types
  // Declared in start order; stop() releases them in reverse.
  std::unique_ptr<persistence::pg_pool> pool;
  std::unique_ptr<caf::actor_system_config> caf_cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::shared_ptr<node_stats> stats = std::make_shared<node_stats>();
  std::unique_ptr<metrics> counters = std::make_unique<metrics>(stats);
  std::vector<store_actor> stores;
  std::vector<writer_actor> writers; ///< offers' write-behind writers, shared by the shards
  /// Durable entities (the application's actor types): stores and writers, when any type is
  /// registered.
  std::vector<entity_store_actor> entity_stores;
  std::vector<entity_writer_actor> entity_writers;
  std::shared_ptr<kit::entity_stats> entity_stats = std::make_shared<kit::entity_stats>();
  std::shared_ptr<kit::writer_stats> entity_write_stats = std::make_shared<kit::writer_stats>();
  std::unique_ptr<entity_service> entities;
  std::vector<pool_actor> pools; ///< of the blocking stages
  std::unique_ptr<call_hub> hub; ///< makes requests for gRPC calls and Kafka threads
  std::shared_ptr<router> routes;
  link_security security;
  std::unique_ptr<grpc::Service> link_service;
  std::unique_ptr<grpc::Server> link_server;
  caf::actor manager; ///< the cluster manager: leases, shards, routes
  caf::actor relay;   ///< the outbox relay to Kafka
  std::unique_ptr<after_save_consumer> after_save; ///< feeds stages' after_save hooks
  std::unique_ptr<feed_exchange> feeds;            ///< applies feed loads from Kafka
  std::unique_ptr<offer_service> offers;
  std::unique_ptr<admin_service> admin;
  std::unique_ptr<state_service> states;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<admin_http> http;
  int grpc_port = 0;
  uint16_t http_port = 0;
  bool stopped = false;
};

node::node(config::node_config cfg, extensions ext) : impl_(std::make_unique<impl>()) {
  impl_->cfg = std::move(cfg);
  impl_->ext = std::move(ext);
  if (!impl_->ext.entity_types)
    impl_->ext.entity_types = std::make_shared<entity_registry>();
}

node::~node() { stop(); }

uint16_t node::grpc_port() const { return static_cast<uint16_t>(impl_->grpc_port); }

uint16_t node::http_port() const { return impl_->http_port; }

std::string node::start() {
  auto& d = *impl_;
  auto& cfg = d.cfg;
  // Before any gRPC server exists: undecodable requests are answered INVALID_ARGUMENT and
  // logged rate-limited (rpc/parse_guard.hpp).
  rpc::install_protobuf_log_hook();
  // 0. stages (a bad declaration stops the start before anything else runs)
  auto stages = std::make_shared<stage_registry>();
  if (cfg.stages.expire.enabled)
    stages->add("expire", make_expire_stage(cfg.stages.expire.after));
  if (cfg.stages.audit.enabled)
    stages->add("audit", make_audit_stage(cfg.stages.audit.every));
  for (auto& ext : cfg.stages.external) {
    if (auto problem = check_external_stage(ext, *stages); !problem.empty())
      return "config key `stages.external` is invalid: " + problem;
    stages->add(ext.id, make_external_stage(ext), external_stage_options(ext));
    lg->info("external stage id={} address={} parallelism={}", ext.id, ext.address,
             ext.parallelism);
  }
  // The application's own stages (node_builder::add_stage).
  for (auto& app : d.ext.stages) {
    if (stages->find(app.id) != nullptr)
      return "stage id `" + app.id + "` is registered twice (a built-in or external stage has it)";
    stages->add(app.id, app.impl, app.opts ? *app.opts : stage_options{});
    lg->info("stage id={} (application)", app.id);
  }
  bool hosts_entities = !d.ext.entity_types->empty();
  for (auto& t : d.ext.entity_types->all())
    lg->info("entity type kind={} state={} event={}", t->kind(),
             t->state_descriptor()->full_name(), t->event_descriptor()->full_name());

  // 1. PostgreSQL
  auto dsn = cfg.pg.dsn;
  if (dsn.empty()) {
    auto started = start_embedded_pg(cfg.pg);
    if (!started)
      return error_message(started.error());
    dsn = *started;
    lg->info("embedded PostgreSQL ready dsn={}", dsn);
  }
  persistence::pg_pool::options po;
  po.dsn = dsn;
  po.size = cfg.pg.pool_size;
  po.acquire_timeout = cfg.api.request_timeout;
  d.pool = std::make_unique<persistence::pg_pool>(po);
  if (auto err = d.pool->wait_ready(cfg.pg.connect_timeout))
    return error_message(err);
  auto applied = persistence::migrate(*d.pool);
  if (!applied)
    return error_message(applied.error());
  if (*applied > 0)
    lg->info("schema migrations applied count={}", *applied);
  if (auto err = persistence::ensure_installation(*d.pool, cfg.shard.count))
    return error_message(err);
  if (auto err = persistence::ensure_lease_rows(*d.pool, cfg.shard.count))
    return error_message(err);
  // 2. actor system
  d.caf_cfg = std::make_unique<caf::actor_system_config>();
  register_offer_types(*d.caf_cfg);
  d.caf_cfg->set("scheduler.max-threads", static_cast<size_t>(cfg.scheduler.threads));
  d.caf_cfg->set("scheduler.policy", cfg.scheduler.policy == "stealing" ? caf::atom("stealing")
                                                                         : caf::atom("sharing"));
  d.caf_cfg->set("logger.verbosity", caf::atom("quiet"));
  d.sys = std::make_unique<caf::actor_system>(*d.caf_cfg);

  // 3. actors. Shards are not started here: the cluster manager starts the shards whose
  // leases it takes (all of them on a single node) after the node is registered.
  for (int i = 0; i < cfg.pg.pool_size; ++i)
    d.stores.push_back(spawn_store(*d.sys, *d.pool, d.stats));
  if (hosts_entities) {
    d.entity_stores.push_back(spawn_entity_store(*d.sys, *d.pool));
    d.entity_writers = spawn_entity_writers(*d.sys, *d.pool, 1, cfg.write.batch_max,
                                            cfg.write.flush_delay, d.entity_write_stats);
  }
  // Writers matched to connections: two share a 4-connection pool with the stores.
  d.writers = spawn_offer_writers(*d.sys, *d.pool, static_cast<size_t>(std::max(1, cfg.pg.pool_size / 2)),
                                  cfg.write.batch_max, cfg.write.flush_delay, d.stats);
  for (auto& e : stages->all())
    d.stats->add_stage(e.id);
  auto pools = spawn_stage_pools(*d.sys, *stages);
  for (auto& [id, p] : *pools)
    d.pools.push_back(p);
  d.hub = std::make_unique<call_hub>(*d.sys, static_cast<size_t>(std::max(2, cfg.scheduler.threads)));
  d.routes = std::make_shared<router>(cfg.shard.count, d.stores);
  // The node-to-node link: NodeService on caf.listen, mutual TLS when configured.
  auto security = link_security::load(cfg.cluster);
  if (!security)
    return error_message(security.error());
  d.security = std::move(*security);
  d.link_service = make_node_service(*d.hub, d.routes, cfg.api.request_timeout);
  int link_port = 0;
  {
    grpc::ServerBuilder lb;
    lb.AddListeningPort(cfg.caf.listen.to_string(), d.security.server_credentials(), &link_port);
    lb.RegisterService(d.link_service.get());
    d.link_server = lb.BuildAndStart();
  }
  if (!d.link_server || link_port == 0)
    return "cannot listen on caf.listen=" + cfg.caf.listen.to_string()
           + " (in use, or not an address of this host); choose another `caf.listen`";
  lg->info("node link listening port={} tls={}", link_port,
           d.security.enabled ? "mutual" : "off (plaintext: loopback or a private network only)");
  auto spawn_one = [&d, stages, pools](uint32_t s, int64_t epoch) {
    auto& c = d.cfg;
    shard_options so;
    so.shard = s;
    so.node_id = c.node.id;
    so.store = d.stores[s % d.stores.size()];
    so.offer_idle_timeout = c.offer.idle_timeout;
    so.max_resident = c.offer.max_resident;
    so.rescan_every = c.rescan.interval;
    so.rescan_page = c.rescan.page;
    so.stats = d.stats;
    so.writer = kit::writer_for(d.writers, s);
    so.epoch = epoch;
    so.stages = stages;
    so.pools = pools;
    so.queue_lookahead = c.queue.lookahead;
    so.queue_poll = c.queue.poll;
    so.queue_prefetch = c.queue.prefetch;
    so.queue_page = c.queue.page;
    so.max_attempts = c.stage.max_attempts;
    so.max_chain = c.stage.max_chain;
    local_shard here;
    here.offers = spawn_shard(*d.sys, std::move(so));
    if (!d.entity_stores.empty()) {
      entity_shard_options eo;
      eo.shard = s;
      eo.epoch = epoch;
      eo.shard_count = c.shard.count;
      eo.store = d.entity_stores[s % d.entity_stores.size()];
      eo.writer = kit::writer_for(d.entity_writers, s);
      eo.types = d.ext.entity_types;
      // Events for entities of other shards this node owns reach them at once; other nodes'
      // shards find theirs by polling.
      eo.notify = [routes = d.routes](uint32_t shard, const persistence::queue_entries& entries) {
        if (auto local = routes->local_entities(shard))
          caf::anon_send(*local, enqueued_atom_v, entries);
      };
      eo.queue_lookahead = c.queue.lookahead;
      eo.queue_poll = c.queue.poll;
      eo.queue_page = c.queue.page;
      eo.idle_timeout = c.offer.idle_timeout;
      eo.max_resident = c.offer.max_resident;
      eo.stats = d.entity_stats;
      here.entities = spawn_entity_shard(*d.sys, std::move(eo));
    }
    return here;
  };

  // 4. gRPC
  d.offers = std::make_unique<offer_service>(*d.hub, *d.routes, d.counters->calls(), cfg.api.request_timeout);
  d.states = std::make_unique<state_service>(*d.hub, *d.routes, d.counters->calls(), cfg.api.request_timeout);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  // grpc.health.v1.Health: SERVING while the node serves; NOT_SERVING once it stops.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder b;
  b.AddListeningPort(cfg.grpc.listen.to_string(), grpc::InsecureServerCredentials(), &d.grpc_port);
  d.admin = std::make_unique<admin_service>(
    *d.hub, *d.routes, stages, d.stats, cfg.api.request_timeout,
    admin_service::cluster_view{d.pool.get(), cfg.node.id, cfg.cluster.lease_timeout});
  b.RegisterService(d.offers.get());
  if (hosts_entities) {
    d.entities = std::make_unique<entity_service>(*d.hub, *d.routes, d.ext.entity_types, *d.pool,
                                                  cfg.api.request_timeout);
    b.RegisterService(d.entities.get());
  }
  b.RegisterService(d.admin.get());
  b.RegisterService(d.states.get());
  d.server = b.BuildAndStart();
  if (!d.server || d.grpc_port == 0)
    return "cannot listen on grpc.listen=" + cfg.grpc.listen.to_string()
           + " (address in use or not local?); choose another `grpc.listen`";

  // 5. admin HTTP
  auto* counters = d.counters.get();
  auto node_id = cfg.node.id;
  auto grpc_port = d.grpc_port;
  auto status_page = [counters, node_id, grpc_port, shards = cfg.shard.count,
                      dump = cfg.config_dump] {
    return "<!doctype html><title>gost " + node_id + "</title><h1>gost node " + node_id
           + "</h1><p>gRPC port " + std::to_string(grpc_port) + ", " + std::to_string(shards)
           + " shards. <a href=\"/metrics\">metrics</a></p><h2>metrics</h2><pre>"
           + counters->prometheus_text() + "</pre><h2>configuration</h2><pre>" + dump
           + "</pre>";
  };
  d.http = std::make_unique<admin_http>([counters] { return counters->prometheus_text(); },
                                        status_page);
  std::string http_error;
  d.http_port = d.http->start(cfg.http.listen.host, cfg.http.listen.port, http_error);
  if (d.http_port == 0)
    return http_error;

  // 6. the cluster: register, then the manager takes leases and starts shards
  persistence::node_row me;
  me.node_id = cfg.node.id;
  me.caf_host = cfg.cluster.advertise_host.empty() ? cfg.caf.listen.host : cfg.cluster.advertise_host;
  if (me.caf_host == "0.0.0.0" || me.caf_host.empty())
    me.caf_host = "127.0.0.1";
  me.caf_port = link_port;
  me.grpc_addr = cfg.grpc.listen.host + ":" + std::to_string(d.grpc_port);
  me.http_addr = cfg.http.listen.host + ":" + std::to_string(d.http_port);
  if (auto err = persistence::register_node(*d.pool, me))
    return error_message(err);
  cluster_options co;
  co.cfg = cfg.cluster;
  co.node_id = cfg.node.id;
  co.shard_count = cfg.shard.count;
  co.pool = d.pool.get();
  co.dsn = dsn;
  co.routes = d.routes;
  co.security = d.security;
  co.spawn_shard = spawn_one;
  d.manager = spawn_cluster_manager(*d.sys, std::move(co));

  // 7. after-save events: the outbox relay of the shards this node owns
  relay_options ro;
  ro.kafka = cfg.kafka;
  ro.outbox = cfg.outbox;
  ro.pool = d.pool.get();
  ro.routes = d.routes;
  ro.stats = d.stats;
  if (cfg.outbox.relay) {
    auto relay = spawn_outbox_relay(*d.sys, std::move(ro));
    if (!relay)
      return error_message(relay.error());
    d.relay = std::move(*relay);
  }
  // 8. stages' after_save hooks, fed from the topic by the node's consumer group
  bool hooks = std::any_of(stages->all().begin(), stages->all().end(),
                           [](auto& e) { return e.opts.enabled && e.impl->wants_after_save(); });
  if (hooks && cfg.kafka.brokers.empty()) {
    lg->warn("stages have after_save hooks but kafka.brokers is empty: the hooks are not "
             "called (the in-process mock cluster cannot be consumed by other nodes)");
  } else if (hooks) {
    after_save_options ao;
    ao.kafka = cfg.kafka;
    ao.stages = stages;
    ao.stats = d.stats;
    auto consumer = after_save_consumer::start(std::move(ao));
    if (!consumer)
      return error_message(consumer.error());
    d.after_save = std::move(*consumer);
  }
  // 9. the feed exchange (offer store side)
  if (!cfg.feed.requests_topic.empty()) {
    feed_options fo;
    fo.kafka = cfg.kafka;
    fo.feed = cfg.feed;
    fo.api = cfg.api;
    fo.hub = d.hub.get();
    fo.routes = d.routes;
    fo.pool = d.pool.get();
    auto exchange = feed_exchange::start(std::move(fo));
    if (!exchange)
      return error_message(exchange.error());
    d.feeds = std::move(*exchange);
  }
  lg->info("node serving grpc={}:{} http={}:{} caf={}:{} shards={} pg_pool={}",
           cfg.grpc.listen.host, d.grpc_port, cfg.http.listen.host, d.http_port,
           me.caf_host, link_port, cfg.shard.count, cfg.pg.pool_size);
  return {};
}

void node::stop() {
  auto& d = *impl_;
  if (d.stopped)
    return;
  d.stopped = true;
  auto deadline = std::chrono::system_clock::now() + d.cfg.shutdown.timeout;
  // 9. the feed exchange, 8. the after_save consumer (what they did not finish is handled
  // again by their groups' next members)
  d.feeds.reset();
  d.after_save.reset();
  // 6. hand every shard to the other nodes (drained and released; requests keep being
  // answered meanwhile, forwarded to the new owners as they take over)
  if (d.sys && d.manager) {
    caf::scoped_actor self{*d.sys};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::system_clock::now());
    self->request(d.manager, std::max(left, std::chrono::milliseconds{1}), leave_atom_v)
      .receive([](ok_atom) {},
               [](caf::error& err) {
                 lg->warn("shard hand-off incomplete at stop error={}; leases expire instead",
                          error_message(err));
               });
    // Give the other nodes (if any) a heartbeat to take the released leases, so requests
    // still in flight here find the new owners.
    auto nodes = persistence::list_nodes(*d.pool, d.cfg.cluster.lease_timeout);
    bool others = nodes && std::any_of(nodes->begin(), nodes->end(), [&](auto& n) {
                    return n.alive && n.node_id != d.cfg.node.id;
                  });
    if (others)
      std::this_thread::sleep_for(std::min(d.cfg.cluster.heartbeat * 2, std::chrono::milliseconds{2000}));
  }
  // 5. admin HTTP
  d.http.reset();
  // 4. stop taking requests; in-flight calls finish until the deadline
  if (d.server) {
    if (auto* health = d.server->GetHealthCheckService())
      health->SetServingStatus(false);
    d.server->Shutdown(deadline);
    d.server->Wait();
    d.server.reset();
  }
  // ... and the node link (other nodes stopped forwarding here once the hand-off was done)
  if (d.link_server) {
    d.link_server->Shutdown(deadline);
    d.link_server->Wait();
    d.link_server.reset();
  }
  d.link_service.reset();
  d.admin.reset();
  d.offers.reset();
  d.states.reset();
  d.entities.reset();
  // 3. the cluster manager (it stops the shards it still runs), the gateway, then the stage
  // pools and the stores the shards used
  if (d.sys) {
    caf::scoped_actor self{*d.sys};
    auto stop_all = [&](auto& handles) {
      for (auto& h : handles) {
        self->monitor(h);
        self->send_exit(h, caf::exit_reason::user_shutdown);
      }
      for (size_t i = 0; i < handles.size(); ++i)
        self->receive([](const caf::down_msg&) {});
      handles.clear();
    };
    std::vector<caf::actor> cluster{d.relay, d.manager};
    cluster.erase(std::remove(cluster.begin(), cluster.end(), caf::actor{}), cluster.end());
    stop_all(cluster);
    // The actor system waits until the last handle of every detached actor is gone.
    d.relay = d.manager = caf::actor{};
    d.hub.reset();
    stop_all(d.pools);
    stop_all(d.writers);
    stop_all(d.stores);
    stop_all(d.entity_writers);
    stop_all(d.entity_stores);
  }
  d.routes.reset();
  // 2. actor system (its destructor waits for every actor)
  d.sys.reset();
  d.caf_cfg.reset();
  // 1. database connections
  d.pool.reset();
}

namespace {

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

} // namespace

int run_node(config::node_config cfg, extensions ext) {
  // Block the stop signals before any thread exists so every thread inherits the mask and
  // only the sigwait below sees them.
  auto set = stop_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  setup_logging(cfg.node.id, cfg.log);
  lg->info("starting gostd node_id={}", cfg.node.id);
  lg->debug("configuration:\n{}", cfg.config_dump);
  auto port_file = cfg.grpc.port_file;
  node n{std::move(cfg), std::move(ext)};
  if (auto err = n.start(); !err.empty()) {
    lg->error("gostd cannot start: {}", err);
    n.stop();
    return 1;
  }
  if (!port_file.empty()) {
    auto tmp = port_file + ".tmp";
    std::ofstream(tmp) << n.grpc_port() << "\n" << n.http_port() << "\n";
    std::rename(tmp.c_str(), port_file.c_str());
  }
  int sig = 0;
  sigwait(&set, &sig);
  lg->info("stopping on {}", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  n.stop();
  lg->info("stopped cleanly");
  spdlog::shutdown();
  return 0;
}

} // namespace gost::runtime
