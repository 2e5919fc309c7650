#pragma once
// The image functions' actor pools (seed 003, MISSION I3): per function, the generic actor
// pool (`gost/core/actor_pool.hpp`, `workers` threads) and a feeder that takes as many due
// tasks from the PostgreSQL queue as the pool has room for (of the partitions this node serves
// now), runs each there (`run_task`) and stores the outcomes in batches (`store_outcomes`).
// A task taken and not finished (a crash, a stop) reappears after `visibility`.

#include <chrono>
#include <functional>
#include <map>
#include <vector>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "gost/images/worker.hpp"

namespace gost::images {

struct pools_options {
  persistence::pg_pool* db = nullptr;
  worker_options work;
  /// Threads per function; a function with 0 (or missing) gets no pool on this node.
  std::map<function, int> workers;
  /// How often an idle feeder looks for due tasks.
  std::chrono::milliseconds poll{250};
  /// How long a taken task stays invisible to other takers: above the longest run.
  std::chrono::milliseconds visibility{120'000};
  /// The partitions this node serves now (the shards it holds).
  std::function<std::vector<uint32_t>()> partitions;
};

/// Starts a pool and a feeder per function with workers; stop them with an exit message.
std::vector<caf::actor> spawn_image_pools(caf::actor_system& sys, const pools_options& opts);

} // namespace gost::images
