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
  bool gone = false; ///< its process is gone: its liveness lock is free (migration 0011)
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
/// The same for the shards of one group (ADR 0023): the rows of `shards` that do not exist.
caf::error ensure_lease_rows(pg_pool& pool, const std::vector<uint32_t>& shards);

/// Registers (or re-registers after a restart) a node: alive, not leaving.
caf::error register_node(pg_pool& pool, const node_row& node);

/// Marks the node as leaving: others stop counting it when they compute their share (or,
/// with false, as a member again: an operator ended a drain).
caf::error set_leaving(pg_pool& pool, const std::string& node_id, bool leaving = true);

/// Renews the node's heartbeat and the heartbeats of the leases it holds, in one
/// transaction. Returns the leases still held (a lease taken over by another node, at a new
/// epoch, is missing: the shard is lost and must stop).
caf::expected<std::vector<held_lease>> heartbeat(pg_pool& pool, const std::string& node_id,
                                                 const std::vector<held_lease>& held);

caf::expected<std::vector<node_row>> list_nodes(pg_pool& pool,
                                                std::chrono::milliseconds node_timeout);

caf::expected<std::vector<lease_row>> list_leases(pg_pool& pool,
                                                  std::chrono::milliseconds lease_timeout);

/// A backend of an expired lease owner that acquire_free_lease ended.
struct ended_backend {
  std::string owner;
  int pid = 0;
};

struct acquisition {
  std::optional<held_lease> lease; ///< none: no free lease could be taken
  /// Transactions of expired owners that held a free lease's row (a commit frozen half-way)
  /// and were ended, so that the next round can take the lease.
  std::vector<ended_backend> ended;
};

/// Takes one free lease (no owner, its heartbeat older than `lease_timeout`, or its owner's
/// process gone): among the free ones the shard processed longest ago (seed 001), preferring
/// leases handed off to this node. The epoch grows by one; the other nodes are notified.
/// When every free lease is locked by a transaction of its expired owner older than half the
/// lease timeout, that transaction's backend is ended (`ended`): a frozen commit never holds a
/// shard hostage. `only`, when not empty: a lease of these shards only (the group's, ADR 0023:
/// a database may still hold the rows of shards another group serves now).
caf::expected<acquisition> acquire_free_lease(pg_pool& pool, const std::string& node_id,
                                              std::chrono::milliseconds lease_timeout,
                                              const std::vector<uint32_t>& only = {});

/// Frees the leases `node_id` owns but does not hold (`held`): its previous incarnation's,
/// taken back at once after a restart. Call only while this incarnation holds the node's
/// liveness lock (cluster_listener::holds_liveness_lock), which proves the previous one gone.
/// They are marked handed off to `node_id`, which takes them first. Returns how many.
caf::expected<int64_t> free_previous_leases(pg_pool& pool, const std::string& node_id,
                                            const std::vector<uint32_t>& held);

/// The application_name of a node's database sessions (`gost/<node id>`, at most 63 bytes):
/// how acquire_free_lease finds an expired owner's transactions.
constexpr const char* application_name_prefix = "gost/";
std::string application_name(const std::string& node_id);

/// Records that the owner drains `shard` to hand it to `to` (shown as a move in progress).
caf::error mark_handoff(pg_pool& pool, const std::string& node_id, held_lease lease,
                        const std::string& to);

/// Gives a lease up (graceful hand-off or stop): the shard is free at once. A no-op when the
/// lease is no longer this node's at that epoch.
caf::error release_lease(pg_pool& pool, const std::string& node_id, held_lease lease);

/// The channel on which register_node, set_leaving and release_lease notify (NOTIFY).
constexpr const char* cluster_channel = "gost_cluster";

/// The channel of wake notices: work was written for a shard behind its owner's back (another
/// node's requeue, an event sent to an entity of another node's shard, a scheduled action
/// created elsewhere). The payload is "<part>:<shard>" (wake_payload), the part being a shard
/// kind's name (`offers`, `entities`) or a node part's (`scheduled`); the owner looks at once
/// instead of at its next safety poll.
constexpr const char* wake_channel = "gost_wake";

/// "<part>:<shard>".
std::string wake_payload(const std::string& part, uint32_t shard);

/// Parses a wake payload; false when it is not one (the part empty, the shard not a number).
bool parse_wake_payload(const std::string& payload, std::string& part, uint32_t& shard);

/// Sends wake notices on `wake_channel`, all in one statement (duplicates are sent once).
caf::error notify_wakes(pg_pool& pool, const std::vector<std::string>& payloads);

/// The node's own session with the cluster, on a connection of its own:
/// - listens on `cluster_channel` and calls `on_change` (on its thread) for every
///   notification: a node joined or is leaving, a lease was released or taken; and on
///   `groups_channel` (groups.hpp: the shard map changed, in the catalog database);
/// - listens on `wake_channel` and calls `on_wake` (on its thread, when given) with each
///   notice's payload;
/// - when `node_id` is given, holds the node's liveness lock (a session advisory lock on
///   nodes.lock_key) for as long as the process lives, and every ~200 ms, while other nodes
///   own leases (`watch_others`), looks for nodes whose lock is free (their process is gone)
///   while they own leases: `on_change` is called when that set changes, and when this node
///   gets its lock if no `on_lock` is given (else `on_lock(true)` says it).
/// A lost connection is reopened after a second (the lock is taken again); what was missed
/// meanwhile the heartbeat catches. `on_lock`, when given, is called (on its thread) with true
/// when the liveness lock is taken and with false as soon as the session that held it is lost:
/// other nodes may take this node's leases from that moment.
class cluster_listener {
public:
  cluster_listener(std::string dsn, std::function<void()> on_change, std::string node_id = {},
                   std::function<void(const std::string&)> on_wake = {},
                   std::function<void(bool)> on_lock = {});
  ~cluster_listener(); ///< stops and joins the thread (within ~200 ms)

  /// This process holds the node's liveness lock: no earlier incarnation of the node is alive.
  bool holds_liveness_lock() const;

  /// Whether other nodes own leases now (the cluster manager says so after each heartbeat):
  /// only then is the look for gone nodes worth its statement every ~200 ms. On at the start.
  void watch_others(bool on);
  cluster_listener(const cluster_listener&) = delete;
  cluster_listener& operator=(const cluster_listener&) = delete;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace gost::persistence
