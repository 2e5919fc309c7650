#pragma once
// The cluster side of a node (MISSION R7, seed 001):
//
// - the manager: a detached actor that heartbeats the node and its leases every
//   `cluster.heartbeat`, takes free leases up to an even share, hands shards to underloaded
//   nodes (drain, then release; at most `cluster.max_moves` at a time), stops shards whose
//   lease was taken over, and keeps the router's table of owners current (node_link.hpp
//   serves and forwards the requests themselves).
//
// It starts idle and joins the cluster on `join` (after the node registered itself): it is
// spawned before the node's gRPC servers and stopped after them, because calls in flight
// there are forwarded through the peer links it owns.

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cluster/node_link.hpp"
#include "cluster/router.hpp"

#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "gost/config/node_config.hpp"
#include "gost/offers/protocol.hpp"

namespace gost {
class dependency_tracker;
struct node_stats;
} // namespace gost

namespace gost::persistence {
class pg_pool;
}

CAF_ADD_ATOM(gost_runtime, gost::runtime, join_atom, "join")
CAF_ADD_ATOM(gost_runtime, gost::runtime, leave_atom, "leave")
CAF_ADD_ATOM(gost_runtime, gost::runtime, drain_node_atom, "drainnode")
CAF_ADD_ATOM(gost_runtime, gost::runtime, undrain_atom, "undrain")

namespace gost::runtime {

struct cluster_options {
  /// `cluster.*`: heartbeat, lease timeout, moves at once (the TLS files are read into
  /// `security`).
  config::cluster_config cfg;
  std::string node_id;
  uint32_t shard_count = 0;
  /// The shard group this manager serves (ADR 0023: a node runs one per group): its id, its
  /// name (logs) and its shards, in order (none: all `shard_count`, the one group of an
  /// installation without groups; empty: a group holding no shard, taking no lease). `pool` and
  /// `dsn` are the group's database, which holds its leases, the `nodes` rows and the liveness
  /// locks: the group is a small cluster of its own.
  uint32_t group = 0;
  std::string group_name;
  std::optional<std::vector<uint32_t>> shards;
  persistence::pg_pool* pool = nullptr;
  /// The catalog database's pool, where the cluster-wide rows are (the stages' pauses); null:
  /// `pool` is the catalog's.
  persistence::pg_pool* catalog = nullptr;
  /// For the LISTEN connection (joins, leaves and released leases are noticed at once);
  /// empty: membership changes are noticed at the next heartbeat only.
  std::string dsn;
  /// The table of owners it keeps current; a lease it takes starts one supervisor per kind
  /// registered in `routes->kinds()` (cluster/kinds.hpp), each with the stages paused now.
  std::shared_ptr<router> routes;
  /// The node's PostgreSQL tracker: failures of an outage it reported are not logged again
  /// at every heartbeat. May be null.
  std::shared_ptr<const dependency_tracker> db;
  /// Credentials of the links to other nodes.
  link_security security;
  /// The largest message a link to another node receives (node/limits.hpp).
  int link_max_bytes = 8 << 20;
  /// Where the stages' `paused` figures are kept. May be null.
  std::shared_ptr<node_stats> stats;
  /// How long a pause waits for the runs of the stage in flight here.
  std::chrono::milliseconds pause_timeout{30'000};
  /// Wake notices heard on the LISTEN connection (persistence::wake_channel), on its thread.
  /// Empty: not listened to.
  std::function<void(const std::string&)> on_wake;
  /// Called at every heartbeat and notice (on the manager's thread), before the leases are
  /// looked at: the catalog group's manager looks whether the shard map changed (a range moved:
  /// set_manager_shards). Empty: nothing.
  std::function<void()> on_look;
};

/// The manager's interface (what the node's start and stop and the admin service send it):
///
/// - (join_atom) → ok_atom: at once; its first heartbeat (taking leases, starting shards)
///   follows. The node must be registered first. Idle until then.
/// - (pause_atom) → ok_atom: once the paused stages (table stage_pauses, read again now) run
///   on none of its shards.
/// - (leave_atom) → ok_atom: once every shard it held is drained and released (the node is
///   marked leaving first, so nobody hands it new shards); before a join it holds none.
/// - (drain_node_atom) → uint32_t: the same while the node keeps running (an operator's drain:
///   it forwards calls to the new owners and takes no shard until (undrain_atom)), answering
///   the number of shards it handed off; refused when no other node is alive to take them.
/// - (undrain_atom) → bool: true when the node was drained (it takes its share again at the
///   next heartbeat), false when it was not; refused while the node is stopping.
///
/// Its heartbeat (tick_atom) and the LISTEN connection's notices are its own messages, not
/// part of this interface (manager.cpp).
using manager_actor = caf::typed_actor<
  caf::replies_to<join_atom>::with<ok_atom>, caf::replies_to<pause_atom>::with<ok_atom>,
  caf::replies_to<leave_atom>::with<ok_atom>, caf::replies_to<drain_node_atom>::with<uint32_t>,
  caf::replies_to<undrain_atom>::with<bool>>;

/// A range moved (ADR 0023 decision 5): the manager of a group serves `shards` from now on. A
/// shard it held and no longer serves stops here (its lease was fenced at the source); the
/// new ones are taken at its next look, which comes at once.
void set_manager_shards(const manager_actor& manager, std::vector<uint32_t> shards);

/// Spawns the manager (a detached actor: it blocks on PostgreSQL), idle until (join_atom).
manager_actor spawn_cluster_manager(caf::actor_system& sys, cluster_options opts);

/// The managers of a node's shard groups as one (ADR 0023): each message goes to every one;
/// join, pause and leave are answered once all answered, a drain with the shards handed off
/// in all groups, an undrain with whether any was drained; the first error is the answer.
/// With one manager, that manager itself.
manager_actor spawn_group_managers(caf::actor_system& sys, std::vector<manager_actor> managers);

} // namespace gost::runtime
