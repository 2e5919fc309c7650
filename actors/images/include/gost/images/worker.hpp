#pragma once
// One image task from the queue to its result (seed 003, MISSION I2, I5, I8): fetch the image
// (http_client: size and time limits, redirects limited, internal addresses refused unless
// configured), compute the function (compute.hpp), and say what to store — a result, a final
// error status, or a retry of a recoverable failure. `work_batch` does it for a batch taken
// from the PostgreSQL queue and stores the outcome; the pools (next) call it.

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "gost/core/blob_store.hpp"
#include "gost/core/http_client.hpp"
#include "gost/images/compute.hpp"
#include "gost/images/request.hpp"

#include "gost/persistence/images/images.hpp"

namespace gost::images {

/// Rotated images go to the node's blob store (gost/core/blob_store.hpp), served by the node
/// at its base URL.
using gost::blob_store;

class redis_cache;
struct image_stats;

struct worker_options {
  image_limits limits;
  size_t max_bytes = 20 << 20; ///< an image's download
  std::chrono::milliseconds fetch_timeout{10'000};
  int max_redirects = 3;
  bool allow_private = false;                  ///< images.allow_private_sources
  int max_attempts = 5;                        ///< recoverable failures before the error sticks
  std::chrono::milliseconds retry_base{1'000}; ///< back-off: base × 2^(attempts), capped
  std::chrono::milliseconds retry_cap{300'000};
  const blob_store* blobs = nullptr; ///< rotate needs one
  /// Finished results and error statuses are also written here (images.redis.*); may be null.
  redis_cache* cache = nullptr;
  image_stats* stats = nullptr; ///< counts computed tasks and failures; may be null
  /// images.notify_topic: each finished result and error status is added to the outbox for
  /// this topic (key = result key, value = gost.v1.ImageNotice) in the transaction that
  /// stores it. Empty: no notification.
  std::string notify_topic;
  /// The fetch (tests and benchmarks replace it).
  std::function<http::response(const http::request&)> fetch = http::perform;
};

/// What one task came to.
struct task_outcome {
  enum kind_t { done, final_error, retry } kind = final_error;
  std::string value;      ///< done: the result (gost.v1.ImageRatio, ...), serialized
  std::string error_kind; ///< not_an_image, too_many_pixels, http_404, download_failed, ...
  std::string error;      ///< one line
};

/// Fetches and computes one task.
task_outcome run_task(const task_key& task, const worker_options& opts);

/// Counts of one batch.
struct batch_counts {
  size_t taken = 0, done = 0, final_errors = 0, retried = 0, given_up = 0;
};

/// Stores what tasks came to: results and final errors (and recoverable failures past
/// `max_attempts`, as their last error) in one transaction with the tasks' deletion and their
/// notifications (`notify_topic`, through the outbox, one row per partition); then in Redis
/// (`cache`) with the TTL they got. Other recoverable failures due again after the back-off.
/// Adds to `counts` and `stats`.
struct task_done {
  persistence::image_task task;
  task_outcome outcome;
};
caf::error store_outcomes(persistence::pg_pool& pool, function fn,
                          const std::vector<task_done>& outcomes, const worker_options& opts,
                          batch_counts& counts);

/// Takes up to `limit` due tasks of `fn` in `partitions` from the queue (invisible for
/// `visibility`), runs each, and stores the outcomes: results and final errors in one
/// transaction with the tasks' deletion; a recoverable failure is retried later, or after
/// `max_attempts` stored as its last error (the task deleted).
caf::expected<batch_counts> work_batch(persistence::pg_pool& pool, function fn,
                                       const std::vector<uint32_t>& partitions, size_t limit,
                                       std::chrono::milliseconds visibility,
                                       const worker_options& opts);

} // namespace gost::images
