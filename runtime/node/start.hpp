#pragma once
// The parts of a node, each started by one function: it brings its part up in `n`, pushes the
// part's stop on `n.stops` once the part runs, and returns the first failure as an error
// whose message names what to change. node.cpp runs them in order (`start_order`); adding a
// part is one function here and one line there.

#include <caf/error.hpp>

#include "node/node_context.hpp"

namespace gost::runtime {

/// Built-in, external and the application's stages (start_stages.cpp). A bad declaration
/// stops the start before anything runs.
caf::error start_stages(node_context& n);

/// The embedded PostgreSQL when there is no `pg.dsn`, the pool, migrations, the installation
/// check and the lease rows (start_pg.cpp).
caf::error start_pg(node_context& n);

/// The catalog's versions (stages.catalog.migrations): stores the files' versions not stored
/// yet, reads them all back, gives `catalog.evolve` the chain and every offer shard the sweep of
/// the current version. Nothing when the stage is off.
caf::error start_catalog(node_context& n);

/// The CAF actor system (start_actors.cpp).
caf::error start_actor_system(node_context& n);

/// Store actors (one per pool connection), the offers' writers, the stage pools, the call hub
/// and the routing table (start_actors.cpp). Shards are started later, by the cluster manager.
caf::error start_core_actors(node_context& n);

/// The store and the writer of the application's actor types, when it registered any
/// (start_actors.cpp).
caf::error start_entity_actors(node_context& n);
/// With several shard groups: a forwarder per group for events entities send across groups
/// (start_entity_actors calls it).
caf::error start_entity_forwarders(node_context& n);

/// Scheduled actions: the API's scheduler, and the workers spawned with each shard (seed 001).
caf::error start_scheduled(node_context& n);

/// Registers the kinds hosted on shards in the routing table (offers, durable entities;
/// node/kinds.cpp); start_cluster_manager calls it before the manager can take a lease.
void register_kinds(node_context& n);

/// The cluster manager, spawned idle: it holds the routes' peer links from here on but takes
/// no lease before join_cluster (start_cluster.cpp). Loads the node links' TLS files.
caf::error start_cluster_manager(node_context& n);

/// gost.v1.NodeService on `caf.listen`: other nodes forward requests here (start_cluster.cpp).
caf::error start_node_link(node_context& n);

/// The node's blob store under `images.blob_dir`, when images or feeds run here
/// (start_blobs.cpp): before the gRPC API, which writes uploads to it.
caf::error start_blob_store(node_context& n);

/// The public gRPC API on `grpc.listen`, EntityService included when the node hosts actor
/// types, FeedService when `feed.enabled` (start_grpc.cpp).
caf::error start_grpc(node_context& n);

/// The admin HTTP endpoint on `http.listen` (start_http.cpp).
caf::error start_http(node_context& n);

/// The outbox relay to Kafka, when `outbox.relay` (start_kafka.cpp).
caf::error start_outbox_relay(node_context& n);

/// Registers the node and lets the manager take leases and start shards; its stop hands every
/// shard off (start_cluster.cpp).
caf::error join_cluster(node_context& n);

/// Housekeeping: forgets request ids older than `api.request_ttl` (start_housekeeping.cpp).
caf::error start_housekeeping(node_context& n);

/// The image functions' Kafka queue's producer (images.queue=kafka), before ImageService.
caf::error start_image_queue(node_context& n);

/// The image functions' pools on the shards this node holds (images.enabled), and the Kafka
/// queue's consumers feeding them (images.queue=kafka).
caf::error start_images(node_context& n);

/// The consumer feeding stages' after_save hooks, when a stage has one (start_kafka.cpp).
caf::error start_after_save(node_context& n);

/// The feed exchange, when `feed.requests_topic` is set (start_kafka.cpp).
caf::error start_feed_exchange(node_context& n);

/// The feed processor: loader and processor pools and the answers' consumer, when
/// `feed.enabled` (start_feeds.cpp).
caf::error start_feeds(node_context& n);

/// Readiness from now on: gRPC health and `/readyz` follow the routes and the database
/// (start_readiness.cpp). Last, so that its stop, readiness dropping, is the first.
caf::error start_readiness(node_context& n);

} // namespace gost::runtime
