// The node: its parts started in order (`start_order`), each by its own function in
// node/start_*.cpp that pushes the part's stop once the part runs; `stop` unwinds that stack.

#include "gost/runtime/node.hpp"

#include <csignal>
#include <cstdio>
#include <fstream>

#include <spdlog/spdlog.h>

#include "gost/core/allocator.hpp"
#include "gost/core/errc.hpp"
#include "gost/core/log.hpp"
#include "node/logging.hpp"
#include "node/node_context.hpp"
#include "node/start.hpp"
#include "rpc/parse_guard.hpp"

namespace gost::runtime {

namespace {

const auto lg = gost::log::get("node");

struct start_step {
  const char* name;
  caf::error (*start)(node_context&);
};

/// The start order; `stop` runs the pushed stops backwards. Why this order: the cluster
/// manager comes before the servers because calls in flight there may go through its peer
/// links, so it must stop after them; the node joins (takes leases, starts shards) only once
/// every server runs, and its stop, the hand-off, comes early, while they all still serve;
/// readiness comes last, so at a stop it drops first, before the hand-off.
/// Keep node.hpp's list and docs/architecture.md ("Start and stop") in step with this one.
constexpr start_step start_order[] = {
  {"stages", start_stages},
  {"PostgreSQL", start_pg},
  {"catalog versions", start_catalog},
  {"actor system", start_actor_system},
  {"core actors", start_core_actors},
  {"actor types", start_entity_actors},
  {"scheduled actions", start_scheduled},
  {"cluster manager", start_cluster_manager},
  {"node link", start_node_link},
  {"image queue", start_image_queue},
  {"blob store", start_blob_store},
  {"gRPC API", start_grpc},
  {"admin HTTP", start_http},
  {"outbox relay", start_outbox_relay},
  {"cluster membership", join_cluster},
  {"housekeeping", start_housekeeping},
  {"image functions", start_images},
  {"after_save hooks", start_after_save},
  {"feed exchange", start_feed_exchange},
  {"feed processor", start_feeds},
  {"readiness", start_readiness},
};

} // namespace

node::node(config::node_config cfg, extensions ext)
  : ctx_(std::make_unique<node_context>(std::move(cfg), std::move(ext))) {}

node::~node() {
  stop();
}

uint16_t node::grpc_port() const {
  return static_cast<uint16_t>(ctx_->grpc_port);
}

uint16_t node::http_port() const {
  return ctx_->http_port;
}

std::string node::start() {
  auto& n = *ctx_;
  // Before any gRPC server exists: undecodable requests are answered INVALID_ARGUMENT and
  // logged rate-limited (rpc/parse_guard.hpp).
  rpc::install_protobuf_log_hook();
  for (auto& step : start_order) {
    lg->debug("starting {}", step.name);
    if (auto err = step.start(n))
      return error_message(err);
  }
  lg->info("node serving grpc={}:{} http={}:{} caf={}:{} shards={} pg_pool={}",
           n.cfg.grpc.listen.host, n.grpc_port, n.cfg.http.listen.host, n.http_port,
           n.advertised_host, n.link_port, n.cfg.shard.count, n.cfg.pg.pool_size);
  return {};
}

void node::stop() {
  auto& n = *ctx_;
  if (stopped_)
    return;
  stopped_ = true;
  n.stop_deadline = std::chrono::system_clock::now() + n.cfg.shutdown.timeout;
  n.stops.unwind();
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
  lg->info("starting {} version={} gost_version={} node_id={} allocator=\"{}\"", cfg.app.name,
           cfg.app.version, config::gost_version(), cfg.node.id, allocator_name());
  auto app_name = cfg.app.name;
  lg->debug("configuration:\n{}", cfg.config_dump);
  auto port_file = cfg.grpc.port_file;
  node n{std::move(cfg), std::move(ext)};
  if (auto err = n.start(); !err.empty()) {
    lg->error("{} cannot start: {}", app_name, err);
    n.stop();
    return 1;
  }
  // Last: whoever waits for this file finds every port serving.
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
