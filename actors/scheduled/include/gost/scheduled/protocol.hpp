#pragma once
// The scheduled-actions domain's protocol (seed 001, docs/scheduled-actions.md). Its actors are
// a shard's worker and the node's poller that wakes the workers; their messages are the core's
// atoms, built-in types and the worker's handle, so the domain has no type-ID block (its start
// is reserved: gost::type_ids::scheduled). Other domains (the runtime) reach it through this
// header.

#include <chrono>
#include <functional>
#include <string>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>
#include <caf/typed_actor.hpp>

#include "gost/core/protocol.hpp"
#include "gost/scheduled/rules.hpp"
#include "gost/scheduled/stats.hpp"
#include "gost/scheduled/worker_steps.hpp"

namespace gost::persistence {
class pg_pool;
}

namespace gost::scheduled {

/// A shard's worker, woken by the node's poller (wake: the shard's earliest due time, -1 for
/// none, and whether incoming rows wait to be moved). It wakes itself at its next due time
/// with a timer of its own (worker_actor.cpp), not part of this interface.
using worker_actor = caf::typed_actor<caf::reacts_to<wake_atom, int64_t, bool>>;

/// The node's poller (ADR 0015): one read over the shards of the workers that registered
/// (poll: shard, worker), waking a worker when its shard has incoming rows or a row due before
/// the next read. Idle workers cost nothing between its reads. It reads every poll period while
/// reads find work; each read that finds none doubles the wait, up to `poll_idle` (a safety
/// read), and (wake: shard) — an action created or changed for one of its shards, here or on
/// another node (a wake notice) — brings a read at once (at most one per poll period) and the
/// pace back. Its timer is its own (worker_actor.cpp).
using poller_actor = caf::typed_actor<caf::reacts_to<poll_atom, uint32_t, worker_actor>,
                                      caf::reacts_to<wake_atom, uint32_t>>;

struct worker_options {
  persistence::pg_pool* pool = nullptr;
  uint32_t shard = 0;
  int64_t epoch = 0; ///< the lease the worker works under (fencing)
  rules_options rules;
  std::chrono::milliseconds poll{100}; ///< without a poller: the worker's own look period
  poller_actor poller; ///< the node's poller: the worker registers and does not poll itself
  size_t batch = 256;
  fire_fn fire;                      ///< carries out an attempt (on the worker's thread)
  caf::actor watch;                  ///< the worker stops when this actor does (the shard)
  std::function<int64_t()> clock_ms; ///< null: the system clock
  std::string node; ///< the node's id: named in the attempt log, and the leases' owner the
                    ///< steps are fenced by
  std::shared_ptr<scheduled_stats> stats; ///< the node's figures (null: not counted)
};

/// Spawns the worker of one shard: a detached actor (its own thread: its steps block on
/// PostgreSQL and on the actions themselves). It stops when `watch` stops, and by itself
/// when a step finds the lease at another epoch (fenced).
worker_actor spawn_worker(caf::actor_system& sys, worker_options opts);

/// Spawns a node's poller: a detached actor reading for its registered workers' shards every
/// `poll` while there is work, backing off to `poll_idle` without; workers leave it when they
/// stop. Stop it after them (anon_send_exit).
poller_actor spawn_poller(caf::actor_system& sys, persistence::pg_pool& pool,
                          std::chrono::milliseconds poll,
                          std::chrono::milliseconds poll_idle = std::chrono::milliseconds{5000});

} // namespace gost::scheduled
