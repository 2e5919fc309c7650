#pragma once
// Cluster state in PostgreSQL: node membership (heartbeats) and shard leases (seed 001's
// shard_locks) with fencing epochs. The write-behind layer checks the epoch in every commit;
// these are the calls that move leases between nodes.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gost/persistence/errors.hpp"

namespace gost::persistence {

class pg_pool;

struct node_row {
  std::string node_id;
  std::string caf_host;
  int caf_port = 0;
  std::string grpc_addr;
  std::string http_addr;
  bool alive = false; ///< heartbeat fresher than the node timeout, and not leaving
  bool leaving = false;
  int64_t heartbeat_age_ms = 0;
  int64_t started_at_us = 0;
};

struct lease_row {
  uint32_t shard = 0;
  std::string owner; ///< empty: none
  int64_t epoch = 0;
  bool free = true; ///< no owner, or its heartbeat expired
  int64_t heartbeat_age_ms = 0;
  std::string handoff_to; ///< a move in progress: the owner drains the shard for this node
};

/// A lease this node holds: the shard and the epoch it was acquired at.
struct held_lease {
  uint32_t shard = 0;
  int64_t epoch = 0;
};

/// Creates the lease rows of shards 0..shard_count-1 that do not exist yet.
caf::error ensure_lease_rows(pg_pool& pool, uint32_t shard_count);

/// Registers (or re-registers after a restart) a node: alive, not leaving.
caf::error register_node(pg_pool& pool, const node_row& node);

/// Marks the node as leaving: others stop counting it when they compute their share.
caf::error set_leaving(pg_pool& pool, const std::string& node_id);

/// Renews the node's heartbeat and the heartbeats of the leases it holds, in one
/// transaction. Returns the leases still held (a lease taken over by another node, at a new
/// epoch, is missing: the shard is lost and must stop).
caf::expected<std::vector<held_lease>> heartbeat(pg_pool& pool, const std::string& node_id,
                                                 const std::vector<held_lease>& held);

caf::expected<std::vector<node_row>> list_nodes(pg_pool& pool,
                                                std::chrono::milliseconds node_timeout);

caf::expected<std::vector<lease_row>> list_leases(pg_pool& pool,
                                                  std::chrono::milliseconds lease_timeout);

/// Takes one free lease (no owner, or its heartbeat older than `lease_timeout`): among the
/// free ones the shard processed longest ago (seed 001), preferring leases handed off to this
/// node. The epoch grows by one. Returns nothing when no lease is free.
caf::expected<std::optional<held_lease>>
acquire_free_lease(pg_pool& pool, const std::string& node_id,
                   std::chrono::milliseconds lease_timeout);

/// Records that the owner drains `shard` to hand it to `to` (shown as a move in progress).
caf::error mark_handoff(pg_pool& pool, const std::string& node_id, held_lease lease,
                        const std::string& to);

/// Gives a lease up (graceful hand-off or stop): the shard is free at once. A no-op when the
/// lease is no longer this node's at that epoch.
caf::error release_lease(pg_pool& pool, const std::string& node_id, held_lease lease);

/// The channel on which register_node, set_leaving and release_lease notify (NOTIFY).
constexpr const char* cluster_channel = "gost_cluster";

/// Listens on `cluster_channel` over a connection of its own and calls `on_change` (on its
/// thread) for every notification: a node joined or is leaving, a lease was released. A lost
/// connection is reopened after a second; what was missed meanwhile the heartbeat catches.
class cluster_listener {
public:
  cluster_listener(std::string dsn, std::function<void()> on_change);
  ~cluster_listener(); ///< stops and joins the thread (within ~200 ms)
  cluster_listener(const cluster_listener&) = delete;
  cluster_listener& operator=(const cluster_listener&) = delete;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace gost::persistence
