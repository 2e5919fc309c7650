#include "gost/runtime/node.hpp"

#include <csignal>
#include <fstream>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/exit_reason.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "admin_http.hpp"
#include "admin_service.hpp"
#include "embedded_pg.hpp"
#include "gost/actors/builtin_stages.hpp"
#include "gost/actors/spawn.hpp"
#include "gost/persistence/pg_pool.hpp"
#include "gost/persistence/schema.hpp"
#include "gost/persistence/write_behind.hpp"
#include "logging.hpp"
#include "metrics.hpp"
#include "offer_service.hpp"
#include "router.hpp"

namespace gost::runtime {

using persistence::error_message;

struct node::impl {
  config::node_config cfg;
  // Declared in start order; stop() releases them in reverse.
  std::unique_ptr<persistence::pg_pool> pool;
  std::unique_ptr<caf::actor_system_config> caf_cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::shared_ptr<node_stats> stats = std::make_shared<node_stats>();
  std::unique_ptr<metrics> counters = std::make_unique<metrics>(stats);
  std::vector<store_actor> stores;
  std::vector<shard_actor> shards;
  std::vector<pool_actor> pools; ///< of the blocking stages
  std::unique_ptr<router> routes;
  std::unique_ptr<offer_service> offers;
  std::unique_ptr<admin_service> admin;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<admin_http> http;
  int grpc_port = 0;
  uint16_t http_port = 0;
  bool stopped = false;
};

node::node(config::node_config cfg) : impl_(std::make_unique<impl>()) {
  impl_->cfg = std::move(cfg);
}

node::~node() { stop(); }

uint16_t node::grpc_port() const { return static_cast<uint16_t>(impl_->grpc_port); }

uint16_t node::http_port() const { return impl_->http_port; }

std::string node::start() {
  auto& d = *impl_;
  auto& cfg = d.cfg;
  // 1. PostgreSQL
  auto dsn = cfg.pg_dsn;
  if (dsn.empty()) {
    auto started = start_embedded_pg(cfg);
    if (!started)
      return error_message(started.error());
    dsn = *started;
    spdlog::info("embedded PostgreSQL ready dsn={}", dsn);
  }
  persistence::pg_pool::options po;
  po.dsn = dsn;
  po.size = cfg.pg_pool_size;
  po.acquire_timeout = cfg.request_timeout;
  d.pool = std::make_unique<persistence::pg_pool>(po);
  if (auto err = d.pool->wait_ready(cfg.pg_connect_timeout))
    return error_message(err);
  auto applied = persistence::migrate(*d.pool);
  if (!applied)
    return error_message(applied.error());
  if (*applied > 0)
    spdlog::info("schema migrations applied count={}", *applied);
  if (auto err = persistence::ensure_installation(*d.pool, cfg.shard_count))
    return error_message(err);
  // Single-node mode: this node takes every shard's lease (the cluster issue shares them).
  auto epochs = persistence::acquire_all_leases(*d.pool, cfg.node_id, cfg.shard_count);
  if (!epochs)
    return error_message(epochs.error());
  auto stages = std::make_shared<stage_registry>();
  if (cfg.expire_enabled)
    stages->add("expire", make_expire_stage(cfg.expire_after));

  // 2. actor system
  d.caf_cfg = std::make_unique<caf::actor_system_config>();
  register_types(*d.caf_cfg);
  d.caf_cfg->set("scheduler.max-threads", static_cast<size_t>(cfg.scheduler_threads));
  d.caf_cfg->set("scheduler.policy", cfg.scheduler_policy == "stealing" ? caf::atom("stealing")
                                                                         : caf::atom("sharing"));
  d.caf_cfg->set("logger.verbosity", caf::atom("quiet"));
  d.caf_cfg->load<caf::io::middleman>();
  d.sys = std::make_unique<caf::actor_system>(*d.caf_cfg);
  auto mm_port = d.sys->middleman().open(cfg.caf_listen.port, cfg.caf_listen.host.c_str(), true);
  if (!mm_port)
    return "cannot listen on caf.listen=" + cfg.caf_listen.to_string() + " ("
           + d.sys->render(mm_port.error()) + "); choose another `caf.listen`";

  // 3. actors
  for (int i = 0; i < cfg.pg_pool_size; ++i)
    d.stores.push_back(spawn_store(*d.sys, *d.pool));
  for (auto& e : stages->all())
    d.stats->add_stage(e.id);
  auto pools = spawn_stage_pools(*d.sys, *stages);
  for (auto& [id, p] : *pools)
    d.pools.push_back(p);
  for (uint32_t s = 0; s < cfg.shard_count; ++s) {
    shard_options so;
    so.shard = s;
    so.store = d.stores[s % d.stores.size()];
    so.offer_idle_timeout = cfg.offer_idle_timeout;
    so.max_resident = cfg.offer_max_resident;
    so.rescan_every = cfg.rescan_interval;
    so.rescan_page = cfg.rescan_page;
    so.stats = d.stats;
    so.pool = d.pool.get();
    so.epoch = (*epochs)[s];
    so.stages = stages;
    so.pools = pools;
    so.write_batch_max = cfg.write_batch_max;
    so.write_flush_delay = cfg.write_flush_delay;
    so.queue_lookahead = cfg.queue_lookahead;
    so.queue_poll = cfg.queue_poll;
    so.queue_prefetch = cfg.queue_prefetch;
    so.queue_page = cfg.queue_page;
    so.max_attempts = cfg.stage_max_attempts;
    so.max_chain = cfg.stage_max_chain;
    d.shards.push_back(spawn_shard(*d.sys, std::move(so)));
  }
  d.routes = std::make_unique<router>(d.shards, d.stores);

  // 4. gRPC
  d.offers = std::make_unique<offer_service>(*d.sys, *d.routes, *d.counters, cfg.request_timeout);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder b;
  b.AddListeningPort(cfg.grpc_listen.to_string(), grpc::InsecureServerCredentials(), &d.grpc_port);
  d.admin = std::make_unique<admin_service>(*d.sys, *d.routes, stages, d.stats, cfg.request_timeout);
  b.RegisterService(d.offers.get());
  b.RegisterService(d.admin.get());
  d.server = b.BuildAndStart();
  if (!d.server || d.grpc_port == 0)
    return "cannot listen on grpc.listen=" + cfg.grpc_listen.to_string()
           + " (address in use or not local?); choose another `grpc.listen`";

  // 5. admin HTTP
  auto* counters = d.counters.get();
  auto node_id = cfg.node_id;
  auto grpc_port = d.grpc_port;
  auto status_page = [counters, node_id, grpc_port, shards = cfg.shard_count,
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
  d.http_port = d.http->start(cfg.http_listen.host, cfg.http_listen.port, http_error);
  if (d.http_port == 0)
    return http_error;
  spdlog::info("node serving grpc={}:{} http={}:{} caf={}:{} shards={} pg_pool={}",
               cfg.grpc_listen.host, d.grpc_port, cfg.http_listen.host, d.http_port,
               cfg.caf_listen.host, *mm_port, cfg.shard_count, cfg.pg_pool_size);
  return {};
}

void node::stop() {
  auto& d = *impl_;
  if (d.stopped)
    return;
  d.stopped = true;
  auto deadline = std::chrono::system_clock::now() + d.cfg.shutdown_timeout;
  // 5. admin HTTP
  d.http.reset();
  // 4. stop taking requests; in-flight calls finish until the deadline
  if (d.server) {
    d.server->Shutdown(deadline);
    d.server->Wait();
    d.server.reset();
  }
  d.admin.reset();
  d.offers.reset();
  d.routes.reset();
  // 3. shards, then the stage pools and the stores they used
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
    stop_all(d.shards);
    stop_all(d.pools);
    stop_all(d.stores);
  }
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

int run_node(config::node_config cfg) {
  // Block the stop signals before any thread exists so every thread inherits the mask and
  // only the sigwait below sees them.
  auto set = stop_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  setup_logging(cfg.node_id, cfg.log_level, cfg.log_format);
  spdlog::info("starting gostd node_id={}", cfg.node_id);
  spdlog::debug("configuration:\n{}", cfg.config_dump);
  auto port_file = cfg.grpc_port_file;
  node n{std::move(cfg)};
  if (auto err = n.start(); !err.empty()) {
    spdlog::error("gostd cannot start: {}", err);
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
  spdlog::info("stopping on {}", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  n.stop();
  spdlog::info("stopped cleanly");
  spdlog::shutdown();
  return 0;
}

} // namespace gost::runtime
