#pragma once
// The image functions' figures on /metrics (runtime/console/metrics.cpp): tasks computed and
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

#include "gost/images/request.hpp"

namespace gost::images {

struct image_stats {
  /// Per function, indexed by `slot(fn)`.
  struct per_function {
    std::atomic<uint64_t> computed{0};     ///< tasks whose result was stored (done)
    std::atomic<uint64_t> cache_hits{0};   ///< requests answered DONE or ERROR from the cache
    std::atomic<uint64_t> cache_misses{0}; ///< requests that found nothing (queued or NOT_CACHED)
    std::atomic<int64_t> queued{-1};       ///< tasks in the PostgreSQL queue (-1: not counted yet)
    std::atomic<int64_t> workers{0};       ///< the pool's threads on this node (0: no pool)
    std::atomic<int64_t> in_flight{0};     ///< tasks taken, not yet stored (in the pool, or done)
    std::atomic<int64_t> waiting{0};       ///< Kafka tasks handed to the feeder, not yet taken
    std::atomic<uint64_t> skipped{0};      ///< Kafka tasks skipped: answered after being asked
  };
  std::array<per_function, 4> functions;
  std::atomic<uint64_t> redis_hits{0};      ///< results found in Redis
  std::atomic<uint64_t> redis_fallbacks{0}; ///< Redis calls that failed or were skipped
                                            ///< while it is away (PostgreSQL answered alone)

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

} // namespace gost::images
