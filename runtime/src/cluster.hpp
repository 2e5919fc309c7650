#pragma once
// The cluster side of a node (MISSION R7, seed 001):
//
// - the gateway: a local actor published on `caf.listen`; other nodes send it the offer
//   operations of shards this node owns, and it delegates them to the local shard actor (or
//   answers db_errc::moved when the shard is not here);
// - the manager: a detached actor that heartbeats the node and its leases every
//   `cluster.heartbeat`, takes free leases up to an even share, hands shards to underloaded
//   nodes (drain, then release; at most `cluster.max_moves` at a time), stops shards whose
//   lease was taken over, and keeps the router's table of owners current;
// - the pauser: answers a pause request after a short pause (callers waiting for a moving
//   shard).

#include <chrono>
#include <functional>

#include "node_link.hpp"
#include <memory>
#include <string>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "gost/actors/protocol.hpp"

namespace gost::persistence {
class pg_pool;
}

namespace gost::runtime {

class router;

using pause_atom = caf::atom_constant<caf::atom("pause")>;
using leave_atom = caf::atom_constant<caf::atom("leave")>;

/// How long callers pause before asking again for a shard that is moving.
constexpr auto reroute_pause = std::chrono::milliseconds{50};

/// Answers forwarded offer operations (and residency queries) with this node's shards.
caf::actor spawn_gateway(caf::actor_system& sys, std::shared_ptr<router> r);

/// Asks a local shard whether the actor of offer `id` is resident and how many messages wait
/// in its mailbox (-1: not resident, or busy for over a second); for the inspection console.
void residency(caf::event_based_actor* self, const shard_actor& shard, const std::string& id,
               std::function<void(bool, int64_t)> ok, std::function<void(caf::error)> fail);
caf::actor spawn_pauser(caf::actor_system& sys);

/// The least time a request forwarded to another node gets before it is routed again.
constexpr auto remote_attempt = std::chrono::milliseconds{2000};

struct cluster_options {
  std::string node_id;
  uint32_t shard_count = 0;
  std::chrono::milliseconds heartbeat{1000};
  std::chrono::milliseconds lease_timeout{5000};
  int max_moves = 4;
  persistence::pg_pool* pool = nullptr;
  /// For the LISTEN connection (joins, leaves and released leases are noticed at once);
  /// empty: membership changes are noticed at the next heartbeat only.
  std::string dsn;
  std::shared_ptr<router> routes;
  /// Credentials of the links to other nodes.
  link_security security;
  /// Starts the shard actor of a lease this node just took.
  std::function<shard_actor(uint32_t shard, int64_t epoch)> spawn_shard;
};

/// The manager. Answers (leave_atom) with ok_atom once every shard it held is drained and
/// released (the node is marked leaving first, so nobody hands it new shards).
caf::actor spawn_cluster_manager(caf::actor_system& sys, cluster_options opts);

} // namespace gost::runtime
