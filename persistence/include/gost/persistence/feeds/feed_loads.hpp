#pragma once
// The feed processor's tables (migration 0018, docs/feeds.md "Feed processor", ADR 0019):
// loads, the work queue of the loader and the processor, the per-seller locks, the answers'
// bookkeeping and per-offer errors. Plain functions over the pool; each is one transaction.
// The feeds themselves and the reads for the API are in feed_admin.hpp.
//
// A load moves: fetching (stage `fetch` in the queue: the loader downloads it) → queued (stage
// `process`: the processor reads it) → in_progress (sent; the offer store's answers come in) →
// succeeded; or failed (a fatal error, on the load) or cancelled (its feed removed before it
// ran). Work is taken with the seller's lock of the stage's context (seed `feed_locks`:
// feedloader, feedprocessor) in the same transaction, and every step that ends the work
// releases it; a lock of a node that died is freed by `reap_feed_locks`.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gost/persistence/errors.hpp"

namespace gost::persistence {

class pg_pool;

/// A load as stored (feed_loads), with its statistics (feed_statistics) when any.
struct feed_load_row {
  std::string seller_id;
  std::string ns;
  int64_t load_id = 0;
  int64_t feed_version = 0;
  std::string origin;   ///< url | url-once | upload | parsed | delete
  std::string status;   ///< fetching | queued | in_progress | failed | succeeded | cancelled
  std::string settings; ///< serialized gost.v1.FeedSettings as the load was made
  std::string source_url;
  std::string sha256;
  int64_t bytes = 0;
  std::string format;
  std::string error_kind;
  std::string error_message;
  int32_t attempts = 0;
  std::chrono::system_clock::time_point created_at;
  std::chrono::system_clock::time_point updated_at;
  std::string statistics; ///< serialized gost.v1.FeedLoadStatistics; empty when none yet
};

/// A new load of an existing, not removed feed: `fetching` (with a source URL: queued for the
/// loader) or `queued` (its file stored already: queued for the processor).
struct new_feed_load {
  std::string seller_id;
  std::string ns;
  std::string origin;
  std::string source_url; ///< for `fetching`
  std::string sha256;     ///< for `queued`
  int64_t bytes = 0;
  /// Loads of the feed beyond the newest `keep_loads` (this one counted) are queued for
  /// cleanup (feed_old_loads), as the seed's option 2 writes them "in the API's methods".
  int keep_loads = 10;
};

/// Creates a load with the feed's current version and settings. Errors: not_found (no such
/// feed), conflict (the feed is removed: FAILED_PRECONDITION at the edge), the database's.
caf::expected<feed_load_row> create_feed_load(pg_pool& pool, const new_feed_load& load);

/// URL feeds whose next fetch is due: a `fetching` load for each (at most `limit`), their
/// next fetch moved one period on. Returns the loads made.
caf::expected<std::vector<feed_load_row>> schedule_due_feeds(pg_pool& pool, int limit,
                                                             int keep_loads);

/// A piece of work taken with its seller's lock.
struct feed_job {
  feed_load_row load;
  int32_t attempts = 0; ///< of this stage, before this one
};

/// The oldest due work of `stage` ("fetch" or "process") whose seller holds no lock of the
/// stage's context, with that lock now taken by `node_id`. Nothing when there is none (or
/// another node took the seller first).
caf::expected<std::optional<feed_job>> take_feed_work(pg_pool& pool, const std::string& stage,
                                                      const std::string& node_id);

/// Releases a lock `node_id` holds (a no-op when it holds none): the seed's "always released".
caf::error release_feed_lock(pg_pool& pool, const std::string& stage, const std::string& seller_id,
                             const std::string& node_id);

/// The loader stored the file: the load becomes `queued` with its content address, the work
/// moves to the processor's stage, the feed's last fetch is now (URL feeds), the lock goes.
caf::error feed_fetched(pg_pool& pool, const feed_job& job, const std::string& sha256,
                        int64_t bytes, const std::string& node_id);

/// The stage failed for good: the load is `failed` with the error, its work and lock go.
caf::error feed_failed(pg_pool& pool, const feed_job& job, const std::string& stage,
                       const std::string& kind, const std::string& message,
                       const std::string& node_id);

/// The stage failed for now: tried again after `delay` (attempts counted), the lock goes.
caf::error feed_retry_later(pg_pool& pool, const feed_job& job, const std::string& stage,
                            std::chrono::milliseconds delay, const std::string& message,
                            const std::string& node_id);

/// The processor sent the load: `in_progress` (the offer store's answers come next), its
/// format and statistics so far stored, its work and lock go.
caf::error feed_sent(pg_pool& pool, const feed_job& job, const std::string& format,
                     const std::string& statistics, const std::string& node_id);

/// One per-offer error (feed_offer_errors).
struct feed_offer_error {
  std::string external_id;
  int64_t error_id = 0;
  std::string level; ///< error | warning
  std::string type;
  std::string field;
  std::string title;
  int64_t line = 0;
  std::string message;
};

/// Stores errors of a load (a row already stored stays as it is: idempotent).
caf::error add_feed_offer_errors(pg_pool& pool, const std::string& seller_id, int64_t load_id,
                                 const std::vector<feed_offer_error>& errors);

/// The offer store's answers for a load: the batches answered, and a `rejected` row (error_id
/// 1000) per offer it refused, unless the processor stored an error of that offer already
/// (then the answer only repeats it). Only for a load `in_progress`; false when the load is
/// not this installation's or already ended (the answers are ignored).
caf::expected<bool> record_feed_answers(pg_pool& pool, const std::string& seller_id,
                                        int64_t load_id, const std::vector<std::string>& batch_ids,
                                        const std::vector<feed_offer_error>& rejected);

/// The offer store's terminal answer: the load `succeeded`, its statistics replaced by
/// `statistics` (the processor's counts completed with the store's summary). A load that is
/// not `in_progress` is left as it is (a re-delivered summary).
caf::expected<bool> feed_answered(pg_pool& pool, const std::string& seller_id, int64_t load_id,
                                  const std::string& statistics);

/// A load by id; not_found when there is none.
caf::expected<feed_load_row> get_feed_load(pg_pool& pool, const std::string& seller_id,
                                           int64_t load_id);

/// Frees every lock `node_id` holds: a node starting holds none, so what its id holds is a
/// previous incarnation's (killed mid-step). Returns how many.
caf::expected<int64_t> release_node_feed_locks(pg_pool& pool, const std::string& node_id);

/// Frees locks of nodes that are gone (their process died: `gone_nodes`), that left, or whose
/// heartbeat is older than `node_timeout`, and locks older than `max_hold` (seed: "отслеживает
/// повисшие задачи ... и удаляет локи"). Returns how many.
caf::expected<int64_t> reap_feed_locks(pg_pool& pool, std::chrono::milliseconds node_timeout,
                                       std::chrono::milliseconds max_hold);

} // namespace gost::persistence
