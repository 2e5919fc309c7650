#pragma once
// The image functions' actor pools (seed 003, MISSION I3): per function, the generic actor
// pool (`gost/core/actor_pool.hpp`, `workers` threads) and a feeder that takes as many due
// tasks from the PostgreSQL queue as the pool has room for (of the partitions this node serves
// now), runs each there (`run_task`) and stores the outcomes in batches (`store_outcomes`).
// A task taken and not finished (a crash, a stop) reappears after `visibility`.
//
// Tasks from the Kafka queue (images.queue=kafka) come to the same feeder
// (`run_foreign_tasks`) and run in the same pool, before the PostgreSQL queue's.

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "gost/core/protocol.hpp"
#include "gost/images/worker.hpp"
#include "gost/persistence/cluster/placement.hpp"

namespace gost::images {

struct pools_options {
  /// Where a partition's tasks and results are: the database of the shard group holding that
  /// shard now (ADR 0023; `persistence::one_database` for one).
  std::shared_ptr<const persistence::shard_placement> where;
  worker_options work;
  /// Threads per function; a function with 0 (or missing) gets no pool on this node.
  std::map<function, int> workers;
  /// How often a feeder looks for due tasks while looks find some.
  std::chrono::milliseconds poll{250};
  /// The longest wait between looks that find none: each doubles the wait from `poll` up to
  /// this. Tasks queued through the node's askers wake the feeder at once (wake_atom).
  std::chrono::milliseconds poll_idle{5000};
  /// How long a taken task stays invisible to other takers: above the longest run.
  std::chrono::milliseconds visibility{120'000};
  /// The partitions this node serves now (the shards it holds).
  std::function<std::vector<uint32_t>()> partitions;
};

/// Tasks of one function from another queue, for its feeder: `in_table` false,
/// `created_at_us` when they were asked (`persistence::write_image_pending`).
struct foreign_tasks {
  std::vector<persistence::image_task> tasks;
};

/// What became of foreign tasks.
struct foreign_counts {
  uint64_t run = 0;     ///< computed and stored (a result, an error, or a retry queued)
  uint64_t skipped = 0; ///< their key already held a final result stored after they were asked
};

/// A function's feeder, as the node and the Kafka queue's consumers see it:
///
/// - (run_atom, foreign_tasks) → foreign_counts: tasks from another queue (run_foreign_tasks
///   below), answered once every outcome is stored.
/// - (drain_atom): the other queue's consumers stop: the foreign batches not yet stored are
///   answered with an error at once (their tasks are delivered again; those running finish and
///   are stored, and skipped then as answered), and later ones are refused.
/// - (wake_atom): tasks were queued in PostgreSQL for a partition of this node: look now, and
///   at the busy pace again.
///
/// Its polls of the PostgreSQL queue and its batched stores are its own messages (pools.cpp).
using image_feeder_actor =
  caf::typed_actor<caf::replies_to<run_atom, foreign_tasks>::with<foreign_counts>,
                   caf::reacts_to<drain_atom>, caf::reacts_to<wake_atom>>;

/// Starts a pool and a feeder per function with workers; returns the feeders (stop them with
/// an exit message: each takes its pool with it).
std::map<function, image_feeder_actor> spawn_image_pools(caf::actor_system& sys,
                                                         const pools_options& opts);

/// Runs `tasks` on the pool of `feeder` (a feeder of `spawn_image_pools`): a task whose key
/// holds a final result stored after it was asked is skipped (the Kafka queue's
/// de-duplication; the seed's "check the cache and skip"), identical tasks run once, the
/// others run and their outcomes are stored like the PostgreSQL queue's (a recoverable
/// failure becomes a task there, with its back-off). Returns once every outcome is stored, or
/// an error when one could not be (then deliver the tasks again). Blocking: off CAF's threads.
caf::expected<foreign_counts> run_foreign_tasks(caf::actor_system& sys,
                                                const image_feeder_actor& feeder,
                                                std::vector<persistence::image_task> tasks,
                                                std::chrono::milliseconds timeout);

/// The same without blocking: `done` gets the outcome, once, on one of CAF's threads (it must
/// not block). The Kafka queue's consumers keep several batches in a feeder this way.
void run_foreign_tasks_async(caf::actor_system& sys, const image_feeder_actor& feeder,
                             std::vector<persistence::image_task> tasks,
                             std::chrono::milliseconds timeout,
                             std::function<void(caf::expected<foreign_counts>)> done);

} // namespace gost::images

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(gost::images::foreign_tasks)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(gost::images::foreign_counts)
