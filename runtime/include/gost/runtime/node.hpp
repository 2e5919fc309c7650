#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gost/config/node_config.hpp"

namespace gost {
class entity_registry;
class stage;
struct stage_options;
} // namespace gost

namespace gost::runtime {

/// What an application adds to a node (gost/runtime/node_builder.hpp fills it): its stages and
/// its actor types, hosted next to the built-in ones.
struct extensions {
  struct stage_entry {
    std::string id;
    std::shared_ptr<const stage> impl;
    std::shared_ptr<const stage_options> opts;
  };
  std::vector<stage_entry> stages;
  std::shared_ptr<entity_registry> entity_types;
};

/// One gost node. `start` brings the parts up in order and returns the first failure as one
/// line naming what to change; `stop` takes them down in reverse, draining what is in flight.
///
/// Start order (stop runs it backwards):
///   1. PostgreSQL: embedded server if no pg.dsn, connection pool, migrations, installation
///   2. actor system (CAF scheduler); node links (NodeService) on caf.listen
///   3. store actors (one per pool connection), then shard supervisors
///   4. gRPC server (OfferService, reflection) on grpc.listen
///   5. admin HTTP on http.listen (/, /healthz, /metrics); port file written last
class node {
public:
  explicit node(config::node_config cfg, extensions ext = {});
  ~node();
  node(const node&) = delete;
  node& operator=(const node&) = delete;

  /// Empty string on success, else the reason.
  std::string start();
  void stop();

  uint16_t grpc_port() const;
  uint16_t http_port() const;

  struct impl;

private:
  std::unique_ptr<impl> impl_;
};

/// gostd's main after configuration: start, wait for SIGTERM/SIGINT, stop. Returns the exit
/// code (0 on a clean stop, 1 when start failed).
int run_node(config::node_config cfg, extensions ext = {});

} // namespace gost::runtime
