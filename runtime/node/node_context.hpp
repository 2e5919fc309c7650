#pragma once
// What a running node holds: its configuration, every part started so far and the stack of
// their stops. Each start function (node/start.hpp) fills in its part and pushes its stop;
// a part's fields are empty until its start ran. Only the node's own thread (start, stop) and
// the parts it hands pointers to touch it.

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/exit_reason.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/system_messages.hpp>
#include <grpcpp/grpcpp.h>

#include "api/admin_service.hpp"
#include "api/call_gate.hpp"
#include "api/entity_service.hpp"
#include "api/feed_service.hpp"
#include "api/image_service.hpp"
#include "api/offer_service.hpp"
#include "api/readiness.hpp"
#include "api/scheduled_service.hpp"
#include "api/state_service.hpp"
#include "api/task_service.hpp"
#include "cluster/manager.hpp"
#include "cluster/node_link.hpp"
#include "cluster/router.hpp"
#include "cluster/trace_stream.hpp"
#include "cluster/wakes.hpp"
#include "console/admin_http.hpp"
#include "console/metrics.hpp"
#include "console/series.hpp"
#include "gost/catalog/evolve_stage.hpp"
#include "gost/config/node_config.hpp"
#include "gost/core/blob_store.hpp"
#include "gost/core/call_hub.hpp"
#include "gost/core/dependency.hpp"
#include "gost/entities/spawn.hpp"
#include "gost/feeds/pools.hpp"
#include "gost/images/pools.hpp"
#include "gost/images/redis_cache.hpp"
#include "gost/images/stats.hpp"
#include "gost/images/worker.hpp"
#include "gost/offers/spawn.hpp"
#include "gost/persistence/catalog/versions.hpp"
#include "gost/persistence/cluster/groups.hpp"
#include "gost/persistence/cluster/placement.hpp"
#include "gost/persistence/pg_pool.hpp"
#include "gost/runtime/node.hpp"
#include "gost/scheduled/scheduler.hpp"
#include "gost/scheduled/stats.hpp"
#include "kafka/after_save.hpp"
#include "kafka/feed_answers.hpp"
#include "kafka/feed_exchange.hpp"
#include "kafka/image_queue.hpp"
#include "node/image_tasks.hpp"
#include "node/stop_stack.hpp"

namespace gost::runtime {

/// What a node holds once per shard group (ADR 0023: a group is a database holding a range of
/// shards): the group's pool, the actors reading and writing its offers and entities, its
/// database's tracker and the cluster manager of its leases. An installation without groups
/// has one part, group 0, on `pg.dsn`. Every node serves every group (it holds an even share
/// of each group's shards).
struct group_part {
  persistence::shard_group group; ///< id, name and the DSN as declared (empty for group 0)
  std::vector<uint32_t> shards;   ///< the group's, in order
  std::string dsn;                ///< where the part connects (group 0: the node's `dsn`)
  /// The group's pool: the node's own (`node_context::pool`) for group 0, `own_pool` else.
  persistence::pg_pool* pool = nullptr;
  std::unique_ptr<persistence::pg_pool> own_pool;
  /// The group's database as its calls see it (group 0: the node's `db`).
  std::shared_ptr<dependency_tracker> db;
  std::vector<store_actor> stores;
  std::vector<writer_actor> writers; ///< offers' write-behind writers, shared by its shards
  // the application's actor types (start_entity_actors): empty when it registered none
  std::vector<entity_store_actor> entity_stores;
  std::vector<entity_writer_actor> entity_writers;
  /// Relays events its entities sent to other groups' entities (several groups only).
  entity_forwarder_actor entity_forwarder;
  manager_actor manager;  ///< the group's leases and shards (start_cluster_manager)
  caf::actor relay;       ///< its outbox's relay to Kafka (start_outbox_relay, outbox.relay)
  caf::actor housekeeper; ///< forgets its request ids older than api.request_ttl
};

struct node_context {
  node_context(config::node_config c, extensions e) : cfg(std::move(c)), ext(std::move(e)) {
    if (!ext.entity_types)
      ext.entity_types = std::make_shared<entity_registry>();
    if (!cfg.tasks.enabled)
      ext.entity_types = without_tasks(*ext.entity_types);
  }

  const config::node_config cfg;
  extensions ext; ///< the application's stages and actor types (node_builder)
  stop_stack stops;
  /// Set when the stop begins (`shutdown.timeout` from then): what draining stops may take.
  std::chrono::system_clock::time_point stop_deadline{};

  std::shared_ptr<node_stats> stats = std::make_shared<node_stats>();
  /// PostgreSQL as the pool's calls see it (fed from start_pg on), and the Kafka brokers as
  /// the outbox relay and the consumers see them: each outage logged once, with its end.
  std::shared_ptr<dependency_tracker> db = make_tracker("postgresql", "pg");
  std::shared_ptr<dependency_tracker> kafka = make_tracker("kafka", "kafka");
  /// Readiness (`/readyz`, gRPC health, `gost_ready`): "starting" until the last start step.
  std::shared_ptr<readiness> ready = std::make_shared<readiness>(db);
  /// Live traces' subscriptions, published to by the shards' actors (kit/trail.hpp).
  std::shared_ptr<kit::trace_hub> trace_hub = std::make_shared<kit::trace_hub>();
  /// Redis in front of the image results (images.redis.address; on /metrics only when set).
  std::shared_ptr<dependency_tracker> redis = make_tracker("redis", "images");
  /// The image functions' figures (gost_image_*), fed by ImageService, the pools, housekeeping.
  std::shared_ptr<images::image_stats> image_stats = std::make_shared<images::image_stats>();
  /// The feed processor's figures (gost_feed_*), fed by its pools, the answers' consumer and
  /// housekeeping's cleanup.
  std::shared_ptr<feeds::feed_stats> feed_stats = std::make_shared<feeds::feed_stats>();
  /// Everything the node counts, as each start function registered it (/metrics).
  std::shared_ptr<stats_registry> registry = std::make_shared<stats_registry>();
  /// The gRPC calls' figures (gost_grpc_*), registered here; /metrics renders `registry`.
  std::unique_ptr<metrics> counters =
    std::make_unique<metrics>(registry, build_info{cfg.app.name, cfg.app.version});
  /// The scheduled actions' workers' figures (gost_scheduled_*, when scheduled.enabled).
  std::shared_ptr<scheduled::scheduled_stats> scheduled_stats =
    std::make_shared<scheduled::scheduled_stats>();

  // stages (start_stages)
  std::shared_ptr<stage_registry> stages;
  /// `catalog.evolve`'s versions (stages.catalog.migrations): start_stages reads the files,
  /// start_catalog stores them and sets the chain the stage reads. Null: the stage is off.
  std::shared_ptr<catalog::evolution_source> catalog;
  std::vector<persistence::catalog_version_row> catalog_files;
  /// One-off sweeps every offer shard of this node runs at its start (shard_options::sweeps).
  std::vector<sweep> sweeps;
  // PostgreSQL (start_pg)
  std::string dsn; ///< pg.dsn, or the embedded server's: the catalog database, group 0's
  std::unique_ptr<persistence::pg_pool> pool; ///< of the catalog database (group 0's)
  /// The shard group map as read at the start (ADR 0023), and a part per group, group 0 first.
  std::optional<persistence::group_map> group_map;
  std::vector<std::unique_ptr<group_part>> groups;
  /// By shard, as the map was at the start (routes: router::group_of, current after moves).
  std::vector<group_part*> part_by_shard;
  /// The part of group `id` (every declared group has one).
  group_part& part_for(uint32_t id) const {
    for (auto& p : groups)
      if (p->group.id == id)
        return *p;
    throw std::out_of_range("no part for shard group " + std::to_string(id));
  }
  /// Whether the installation has several groups.
  bool multi_group() const { return groups.size() > 1; }
  // actor system and the actors every part shares (start_actor_system, start_core_actors)
  std::unique_ptr<caf::actor_system_config> caf_cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::shared_ptr<const stage_pools> pools; ///< of the blocking stages
  std::unique_ptr<call_hub> hub;            ///< makes requests for gRPC calls and Kafka threads
  std::shared_ptr<router> routes;
  /// Which database holds a shard now (the routes' groups, each group's pool): what the parts
  /// keeping rows per shard outside the offers' actors ask (scheduled actions).
  std::shared_ptr<const persistence::shard_placement> placement;
  /// Wake notices to and from other nodes (cluster/wakes.hpp); made with the cluster manager.
  std::shared_ptr<wake_hub> wakes;
  // the application's actor types (start_entity_actors; their stores and writers are each
  // group's)
  std::shared_ptr<kit::entity_stats> entity_stats = std::make_shared<kit::entity_stats>();
  std::shared_ptr<kit::writer_stats> entity_write_stats = std::make_shared<kit::writer_stats>();
  // the cluster (start_cluster_manager, start_node_link, join_cluster)
  link_security security;
  /// Live traces: the trace hub the shards publish to, and what serves them (AdminService and
  /// NodeService Trace); made with the manager, stopped before the gRPC servers.
  std::shared_ptr<trace_context> traces;
  /// Leases, shards, routes, peer links: the groups' managers as one (spawn_group_managers).
  manager_actor manager;
  std::unique_ptr<grpc::Service> link_service;
  std::unique_ptr<grpc::Server> link_server;
  int link_port = 0;
  std::string advertised_host; ///< how other nodes reach link_port
  // the public gRPC API (start_grpc)
  std::unique_ptr<offer_service> offers;
  std::unique_ptr<admin_service> admin;
  /// Who may call (api/call_gate.hpp): asked by every gRPC service and the admin HTTP listener.
  std::shared_ptr<caller_gate> gate;
  /// The node's own read token (the web console's live trace calls its AdminService with it).
  std::string internal_token;
  std::unique_ptr<state_service> states;
  std::unique_ptr<entity_service> entities;         ///< when the node hosts actor types
  std::unique_ptr<task_service> tasks;              ///< with them (task types are actor types)
  std::unique_ptr<image_service> images;            ///< images.enabled
  std::unique_ptr<feed_service> feed_api;           ///< feed.enabled
  std::unique_ptr<images::redis_cache> image_cache; ///< images.redis.address (also the pools')
  std::unique_ptr<grpc::Server> server;
  int grpc_port = 0;
  // admin HTTP (start_http)
  std::unique_ptr<admin_http> http;
  uint16_t http_port = 0;
  /// The web page's plots (/api/series): samples of `registry`, taken by `sampler` every
  /// console.sample_interval.
  std::shared_ptr<series_ring> series;
  caf::actor sampler;
  // Kafka (start_outbox_relay, start_after_save, start_feed_exchange)
  std::unique_ptr<after_save_consumer> after_save; ///< feeds stages' after_save hooks
  std::unique_ptr<feed_exchange> feeds;            ///< applies feed loads
  // the feed processor (start_feeds): its pools and the answers' consumer
  feeds::feed_pools feed_pools;
  std::unique_ptr<feed_answers> feed_answers_reader;
  /// images.queue=kafka (start_image_queue): ImageService and the photo stages queue there;
  /// its consumers (start_images) feed the image pools
  std::unique_ptr<image_queue> kafka_images;
  /// images.queue=postgres: the PostgreSQL queue, waking the partitions' feeders
  /// (start_core_actors).
  std::unique_ptr<pg_image_tasks> pg_images;
  /// Where the node's askers (ImageService, the photos stages) queue image tasks.
  images::task_queue* image_tasks() const {
    return kafka_images ? static_cast<images::task_queue*>(kafka_images.get()) : pg_images.get();
  }
  // scheduled actions (start_scheduled): the API's side, and the workers' spawner (null when
  // `scheduled.enabled` is false) called with each shard the cluster manager starts
  std::unique_ptr<scheduled::scheduler> scheduled_api;
  std::function<void(uint32_t shard, uint32_t group, int64_t epoch, caf::actor watch)>
    spawn_scheduled_worker;
  std::unique_ptr<scheduled_service> scheduled_actions; ///< gRPC (start_grpc)
  /// The node's one blob store (start_blob_store, images.blob_dir), when the image functions or
  /// the feed processor run here: rotated images, sellers' feed files (uploads, downloads);
  /// made before the gRPC API, stopped after it. start_images gives it its base URL.
  std::unique_ptr<blob_store> blobs;
  // the image functions (start_images): a pool + feeder per function
  std::map<images::function, images::image_feeder_actor>
    image_pools; ///< the feeders, each with its pool

  bool hosts_entities() const { return !ext.entity_types->empty(); }

  /// The actor types of `all` but the task types (`tasks.enabled` false): a registry of its
  /// own, the builder's stays as it was.
  static std::shared_ptr<entity_registry> without_tasks(const entity_registry& all) {
    auto out = std::make_shared<entity_registry>();
    for (auto& t : all.all())
      if (t->kind().rfind("task.", 0) != 0)
        (void)out->add(t);
    return out;
  }

  static std::shared_ptr<dependency_tracker> make_tracker(std::string name, std::string logger) {
    dependency_tracker::options o;
    o.name = std::move(name);
    o.logger = std::move(logger);
    return std::make_shared<dependency_tracker>(std::move(o));
  }

  /// Sends every actor of `handles` an exit and waits until each is gone (the actor system
  /// waits for detached actors only once their last handle is released as well).
  template <class Handles>
  void stop_actors(Handles& handles) {
    caf::scoped_actor self{*sys};
    for (auto& h : handles) {
      self->monitor(h);
      self->send_exit(h, caf::exit_reason::user_shutdown);
    }
    for (size_t i = 0; i < handles.size(); ++i)
      self->receive([](const caf::down_msg&) {});
  }

  /// The same for one actor, whose handle is released afterwards.
  template <class Handle>
  void stop_actor(Handle& handle) {
    std::vector<Handle> one{handle};
    stop_actors(one);
    handle = Handle{};
  }
};

} // namespace gost::runtime
