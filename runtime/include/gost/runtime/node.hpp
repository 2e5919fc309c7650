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

struct node_context;

/// One gost node. `start` brings the parts up in order and returns the first failure as one
/// line naming what to change; `stop` takes down what started, in reverse, draining what is in
/// flight. Each part is started by its own function (runtime/node/start_*.cpp), which pushes
/// the part's stop only once the part runs; `stop` unwinds that stack.
///
/// Start order (stop runs it backwards; runtime/node/node.cpp `start_order`):
///    1. stages: built-in, `stages.external` and the application's (a bad one stops here)
///    2. PostgreSQL: embedded server if no pg.dsn, pool, migrations, installation, lease rows
///    3. actor system (CAF scheduler)
///    4. store actors (one per pool connection), offer writers, stage pools, call hub, routes
///    5. the application's actor types: their store and writer (when it registered any)
///    6. scheduled actions: the API's side and the spawner of the per-shard workers
///    7. cluster manager, idle (owns the peer links to other nodes); node links' TLS files
///    8. node link server (gost.v1.NodeService) on caf.listen
///    9. the image functions' Kafka queue producer (images.queue=kafka)
///   10. the node's blob store under images.blob_dir (images.enabled or feed.enabled)
///   11. gRPC API (OfferService, AdminService, StateService, EntityService when there are
///       actor types, ImageService, FeedService (feed.enabled), health, reflection) on grpc.listen
///   12. admin HTTP on http.listen (/, /healthz, /readyz, /metrics, /blobs)
///   13. outbox relay to Kafka (outbox.relay)
///   14. cluster membership: the node registers, the manager takes leases and starts shards;
///       its stop is the hand-off (every shard drained and released while all above serves)
///   15. housekeeping: forgets write request ids older than api.request_ttl, reaps results,
///       cleans old feed loads (feed.enabled)
///   16. image functions: a pool and a feeder per function (images.enabled), and the Kafka
///       queue's consumers feeding them (images.queue=kafka)
///   17. after_save consumer (when a stage has an after_save hook and kafka.brokers is set)
///   18. feed exchange (feed.requests_topic)
///   19. feed processor: loader and processor pools, the answers' consumer (feed.enabled)
///   20. readiness: gRPC health and /readyz follow the routes and the database (NOT_SERVING
///       until then); its stop, the first, makes the node unready before the hand-off
/// run_node writes the port file after the last step, once every port serves.
class node {
public:
  explicit node(config::node_config cfg, extensions ext = {});
  ~node();
  node(const node&) = delete;
  node& operator=(const node&) = delete;

  /// Empty string on success, else the reason.
  std::string start();
  /// Unwinds what started (once; `shutdown.timeout` bounds the draining).
  void stop();

  uint16_t grpc_port() const;
  uint16_t http_port() const;

private:
  std::unique_ptr<node_context> ctx_;
  bool stopped_ = false;
};

/// gostd's main after configuration: start, wait for SIGTERM/SIGINT, stop. Returns the exit
/// code (0 on a clean stop, 1 when start failed).
int run_node(config::node_config cfg, extensions ext = {});

} // namespace gost::runtime
