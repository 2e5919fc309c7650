#pragma once
// The scheduled-actions domain's protocol (seed 001, docs/scheduled-actions.md). Its one actor
// is a shard's worker, which only talks to itself (its ticks), with the core block's atoms:
// no type-ID block of its own yet. Other domains (the runtime) reach it through this header.

#include <chrono>
#include <functional>
#include <string>

#include <caf/fwd.hpp>
#include <caf/typed_actor.hpp>

#include "gost/core/protocol.hpp"
#include "gost/scheduled/rules.hpp"
#include "gost/scheduled/worker_steps.hpp"

namespace gost::persistence {
class pg_pool;
}

namespace gost::scheduled {

/// A shard's worker: wakes itself (tick) at its poll period or the next due time.
using worker_actor = caf::typed_actor<caf::reacts_to<tick_atom>>;

struct worker_options {
  persistence::pg_pool* pool = nullptr;
  uint32_t shard = 0;
  int64_t epoch = 0; ///< the lease the worker works under (fencing)
  rules_options rules;
  std::chrono::milliseconds poll{100};
  size_t batch = 256;
  fire_fn fire;                      ///< carries out an attempt (on the worker's thread)
  caf::actor watch;                  ///< the worker stops when this actor does (the shard)
  std::function<int64_t()> clock_ms; ///< null: the system clock
  std::string node;                  ///< named in the attempt log (the node's id)
};

/// Spawns the worker of one shard: a detached actor (its own thread: its steps block on
/// PostgreSQL and on the actions themselves). It stops when `watch` stops, and by itself
/// when a step finds the lease at another epoch (fenced).
worker_actor spawn_worker(caf::actor_system& sys, worker_options opts);

} // namespace gost::scheduled
