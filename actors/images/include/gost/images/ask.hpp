#pragma once
// The one path from a request to an answer (seed 003, MISSION I2), shared by ImageService and
// the photo stages: the result cache first (unless `compute`); found → its status and result;
// not found and not `cache_only` → one task queued (identical requests are one task) with a
// pending status written, and PENDING answered. Never waits for a computation. Blocking: it
// reads and writes PostgreSQL, so callers run it off CAF's scheduler threads.

#include <cstdint>
#include <vector>

#include <caf/error.hpp>

#include "gost/images/request.hpp"

namespace gost::v1 {
class ImageResponse;
}

namespace gost::persistence {
class pg_pool;
class shard_placement;
struct image_request;
} // namespace gost::persistence

namespace gost::images {

class redis_cache;
struct image_stats;

/// One function on one image, with the request's options (validated by the caller).
struct image_ask {
  task_key task;
  int64_t ttl_ms = 0; ///< how long the result (and the pending status) is kept
  bool cache_only = false;
  bool compute = false;
};

/// Where the misses' tasks go (images.queue). Without one (null), the PostgreSQL queue: the
/// tasks and their pending statuses in one transaction (`persistence::enqueue_image_tasks`).
/// The Kafka queue (runtime/kafka/image_queue.hpp) is the other.
class task_queue {
public:
  virtual ~task_queue() = default;
  /// Queues `reqs` with a pending status for each key without a live result, returning only
  /// once the queue holds them (what is answered PENDING is computed). An error: nothing
  /// pending is left behind that no task would replace.
  virtual caf::error enqueue(persistence::pg_pool& pool,
                             const std::vector<persistence::image_request>& reqs) = 0;
};

/// Answers `asks[i]` into `*out[i]` (status, key, result or error; `out` as long as `asks`),
/// queueing the misses in one transaction. `partitions`: shard.count, the tasks' partitions.
/// `cache`: the Redis layer, asked first and filled from PostgreSQL (null: none); `stats`:
/// where cache hits and misses are counted (null: nowhere); `queue`: where misses go (null:
/// the PostgreSQL queue). A database or queue failure is returned (nothing answered then).
caf::error ask_images(persistence::pg_pool& pool, const std::vector<image_ask>& asks,
                      uint32_t partitions, const std::vector<v1::ImageResponse*>& out,
                      redis_cache* cache = nullptr, image_stats* stats = nullptr,
                      task_queue* queue = nullptr);

/// The same over shard groups (ADR 0023): a task's partition is a shard, and its result and
/// queue rows live in the database of the group holding that shard now; the asks are answered
/// group by group (one transaction of misses per group). Partitions: `where.shard_count()`.
caf::error ask_images(const persistence::shard_placement& where, const std::vector<image_ask>& asks,
                      const std::vector<v1::ImageResponse*>& out, redis_cache* cache = nullptr,
                      image_stats* stats = nullptr, task_queue* queue = nullptr);

} // namespace gost::images
