#pragma once
// The image functions' queue and results (seed 003, migration 0016): tasks de-duplicated by
// (function, partition, args), taken oldest first per function and partition with a
// visibility timeout, finished (result stored, task deleted) in batches; results with a TTL,
// reaped.

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "gost/persistence/outbox/outbox.hpp"

namespace gost::persistence {

class pg_pool;

struct image_task {
  std::string function;
  uint32_t partition = 0;
  std::string args;
  int32_t attempts = 0;
  int64_t ttl_ms = 0;
  int64_t created_at_us = 0; ///< when it was queued (a Kafka task: when it was asked)
  std::string last_error;
  /// False for a task from the Kafka queue (images.queue=kafka): it has no row in image_tasks
  /// until a recoverable failure puts it there (`retry_image_task`).
  bool in_table = true;
};

/// A result row: `done` with a value, `error` with a kind and a message, or `pending`.
struct image_result {
  std::string key;
  std::string function;
  std::string args;
  std::string status; ///< pending | done | error
  std::string value;
  std::string error_kind;
  std::string error;
  int32_t attempts = 0;
  int64_t expires_at_us = 0;
  int64_t updated_at_us = 0; ///< when this status or result was written
};

/// The results of `keys` that have not expired (any order; a key without one is missing).
caf::expected<std::vector<image_result>> find_image_results(pg_pool& pool,
                                                            const std::vector<std::string>& keys);

/// A task to queue, with the key of its result and how long its pending status lives.
struct image_request {
  std::string key;
  image_task task;
  int64_t pending_ttl_ms = 0;
  /// Asked with `compute` over a live result (not a miss): queued even though it has one.
  bool recompute = false;
};

/// Queues each task (one identical to a queued task is that task: nothing changes) and writes
/// a pending status for each key without a live result, in one transaction. A miss (not
/// `recompute`) whose key holds a live final result by now — stored since the asker looked —
/// queues nothing: its task was computed already. Returns how many tasks were new.
caf::expected<size_t> enqueue_image_tasks(pg_pool& pool, const std::vector<image_request>& reqs);

/// What `write_image_pending` did.
struct image_pending {
  /// The transaction's time (µs since the epoch): the pending rows' `updated_at` and the
  /// tasks' asked-at, which a consumer compares with a stored result's `updated_at`.
  int64_t asked_at_us = 0;
  /// Keys asked as misses that hold a final result by now (stored since the asker looked):
  /// their tasks need not be queued.
  std::set<std::string> answered;
};

/// The Kafka queue's half of `enqueue_image_tasks`: a pending status for each key without a
/// live result (no task row: the tasks go to Kafka), in one transaction.
caf::expected<image_pending> write_image_pending(pg_pool& pool,
                                                 const std::vector<image_request>& reqs);

/// Undoes `write_image_pending` of `asked_at_us` for `keys` when the tasks could not be
/// queued (a pending status with no task behind it would be answered until its TTL): deletes
/// those keys' rows still pending since then.
caf::error undo_image_pending(pg_pool& pool, const std::vector<std::string>& keys,
                              int64_t asked_at_us);

/// Up to `limit` tasks of `function` in `partitions` that are due, oldest first; each is made
/// invisible for `visibility` (a taker that dies leaves them to be taken again after it).
caf::expected<std::vector<image_task>> take_image_tasks(pg_pool& pool, const std::string& function,
                                                        const std::vector<uint32_t>& partitions,
                                                        size_t limit,
                                                        std::chrono::milliseconds visibility);

/// Stores each result (replacing what the key had; expiring after the task's ttl), deletes
/// its task and adds `outbox` rows (the results' notifications), all in one transaction.
/// `expires_at_us`, when given, gets each stored key's expiry (for the caches in front).
caf::error finish_image_tasks(pg_pool& pool,
                              const std::vector<std::pair<image_task, image_result>>& done,
                              const std::vector<outbox_append>& outbox = {},
                              std::map<std::string, int64_t>* expires_at_us = nullptr);

/// A recoverable failure of `task`: its attempts + 1, due again after `delay`, `error` kept.
/// A task not `in_table` (from the Kafka queue) is inserted with them, so its retries run from
/// the PostgreSQL queue.
caf::error retry_image_task(pg_pool& pool, const image_task& task, const std::string& error,
                            std::chrono::milliseconds delay);

/// Deletes at most `limit` expired results; returns how many.
caf::expected<size_t> reap_image_results(pg_pool& pool, size_t limit);

/// Tasks queued per function (due or not), for the console and metrics.
caf::expected<std::vector<std::pair<std::string, int64_t>>> count_image_tasks(pg_pool& pool);

} // namespace gost::persistence
