#pragma once
// The image functions' figures on /metrics (registered by start_images.cpp): tasks computed and
// failed per function (failures by error kind), cache hits and misses of ImageService, the
// calls that fell back from Redis to PostgreSQL, the tasks queued, and the pools' load. Also
// the image rows of `gostctl top` (AdminService.Top). Written by the feeders,
// ImageService and the Redis layer from any thread; read without stopping them.

#include <array>
#include <atomic>
#include <climits>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "gost/core/stats.hpp"
#include "gost/core/stats_registry.hpp"
#include "gost/images/request.hpp"

namespace gost::images {

// The figures of one image function, each with its metric name after "gost_image_" (label
// `function`, added where the node registers them: start_images.cpp).
#define GOST_IMAGE_FUNCTION_STATS(X)                                                               \
  X(counter, computed, "tasks_computed_total",                                                     \
    "Image tasks computed and stored as results (rate: computed per second).")                     \
  X(gauge, queued, "queue_depth",                                                                  \
    "Image tasks in the PostgreSQL queue, all nodes (counted by housekeeping; -1 before its "      \
    "first round).")                                                                               \
  X(counter, cache_hits, "cache_hits_total",                                                       \
    "ImageService requests that found a result or an error status cached.")                        \
  X(counter, cache_misses, "cache_misses_total",                                                   \
    "ImageService requests that found nothing cached (queued, or NOT_CACHED).")                    \
  X(gauge, workers, "pool_workers",                                                                \
    "Threads of the function's pool on this node (images.<fn>_workers; 0: no pool).")              \
  X(gauge, in_flight, "tasks_in_flight",                                                           \
    "Image tasks taken by this node and not yet stored (in the pool, or computed).")               \
  X(gauge, waiting, "kafka_waiting",                                                               \
    "Kafka queue tasks read by this node and waiting for a slot of the pool.")                     \
  X(counter, skipped, "duplicates_skipped_total",                                                  \
    "Kafka queue tasks skipped: identical to another of their batch, or their result was stored "  \
    "after they were asked (images.queue=kafka).")

// The node-wide figures of the image functions (after "gost_image_", no label).
#define GOST_IMAGE_STATS(X)                                                                        \
  X(counter, redis_hits, "redis_hits_total",                                                       \
    "Image results found in Redis (images.redis.address).")                                        \
  X(counter, redis_fallbacks, "redis_fallbacks_total",                                             \
    "Redis calls of the image functions that failed or were skipped while Redis was away: "        \
    "PostgreSQL answered alone.")

struct image_stats {
  /// Per function, indexed by `slot(fn)`: tasks computed (stored as done), cache hits (DONE or
  /// ERROR from the cache) and misses, tasks in the PostgreSQL queue (-1: not counted yet), the
  /// pool's threads on this node, tasks taken and not yet stored, Kafka tasks handed to the
  /// feeder and not yet taken, Kafka tasks skipped.
  struct per_function {
    per_function() { queued.store(-1, std::memory_order_relaxed); }
    GOST_IMAGE_FUNCTION_STATS(GOST_STAT_MEMBER)
    GOST_STATS_VISIT(GOST_IMAGE_FUNCTION_STATS)
  };
  std::array<per_function, 4> functions;
  GOST_IMAGE_STATS(GOST_STAT_MEMBER) ///< Redis hits; calls that fell back to PostgreSQL
  GOST_STATS_VISIT(GOST_IMAGE_STATS)

  /// Whether the caller should count the queue now (at most once per `every` among all
  /// feeders; `now_ms` on a steady clock).
  bool count_queue_now(int64_t now_ms, int64_t every_ms) {
    auto last = queue_counted_ms_.load(std::memory_order_relaxed);
    return now_ms - last >= every_ms
           && queue_counted_ms_.compare_exchange_strong(last, now_ms, std::memory_order_relaxed);
  }

  static size_t slot(function fn) { return static_cast<size_t>(fn) - 1; }
  per_function& of(function fn) { return functions[slot(fn)]; }

  /// A failed run of `fn` (a final error or a recoverable failure) of `kind`.
  void failed(function fn, const std::string& kind) {
    std::lock_guard<std::mutex> g{mtx_};
    ++failures_[{fn, kind}];
  }
  /// (function, kind) → failed runs.
  std::map<std::pair<function, std::string>, uint64_t> failures() const {
    std::lock_guard<std::mutex> g{mtx_};
    return failures_;
  }

private:
  std::atomic<int64_t> queue_counted_ms_{INT64_MIN / 2};
  mutable std::mutex mtx_;
  std::map<std::pair<function, std::string>, uint64_t> failures_;
};

/// Registers the image functions' figures: GOST_IMAGE_FUNCTION_STATS per function (label
/// `function`), GOST_IMAGE_STATS, and gost_image_task_failures_total (labels `function`, `kind`).
void add_image_metrics(stats_registry& reg, std::shared_ptr<const image_stats> stats);

} // namespace gost::images
