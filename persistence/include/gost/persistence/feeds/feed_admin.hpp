#pragma once
// The feed processor's tables as the API sees them (migration 0018, docs/feeds.md "Feed
// processor API", seed 004): sellers' feeds (create, update, remove, read), the history of
// their loads and per-offer errors (paged, streamed for the CSV export), and the cleanup of old
// loads (seed "Чистка старых данных", option 2). Loads are made by the same statements as the
// pipeline's (feed_loads.hpp). Plain functions over the pool; each change is one transaction.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gost/persistence/errors.hpp"
#include "gost/persistence/feeds/feed_loads.hpp"

namespace gost::persistence {

class pg_pool;

/// A feed as stored (feeds), with the id of its newest load.
struct feed_row {
  std::string seller_id;
  std::string ns;
  int64_t version = 0;
  bool removed = false;
  std::string settings; ///< serialized gost.v1.FeedSettings
  std::string url;      ///< URL feeds: fetched every `period_ms`; else empty
  int64_t period_ms = 0;
  std::optional<std::chrono::system_clock::time_point> last_fetched_at;
  std::optional<std::chrono::system_clock::time_point> next_fetch_at;
  std::chrono::system_clock::time_point created_at;
  std::chrono::system_clock::time_point updated_at;
  int64_t last_load_id = 0; ///< 0: none yet
};

/// What a feed is made of: its settings as the API checked them. `url` non-empty makes it a URL
/// feed, fetched every `period_ms` from now on (its first fetch at once).
struct feed_spec {
  std::string seller_id;
  std::string ns;
  std::string settings; ///< serialized gost.v1.FeedSettings (deterministic)
  std::string url;
  int64_t period_ms = 0;
};

/// Creates a feed. Again with the same settings: the stored feed, unchanged (idempotent); with
/// other settings: already_exists. A removed feed is made anew with these settings (its version
/// goes on growing; the history it had is queued for cleanup already).
caf::expected<feed_row> create_feed(pg_pool& pool, const feed_spec& spec);

/// Replaces a feed's settings; its version grows by one. `expected_version` (0: any) must be
/// the stored one (else conflict). A URL that changed (or is new) is fetched at once; a feed
/// no longer fetched by URL loses its schedule. Errors: not_found, conflict (the version, or a
/// removed feed).
caf::expected<feed_row> update_feed(pg_pool& pool, const feed_spec& spec, int64_t expected_version);

/// What removing a feed did.
struct feed_removal {
  int64_t load_id = 0;   ///< the closing load (origin "delete") that deletes or makes manual
  int64_t cancelled = 0; ///< loads that were waiting (fetching, queued), now cancelled
  bool already = false;  ///< the feed was removed before: nothing changed, its closing load
};

/// Removes a feed (seed: "удаление фида приводит либо к полному удалению всех объявлений ...
/// либо к их переводу в ручной режим"): marked removed (version + 1, no schedule), its waiting
/// loads cancelled (their queue rows deleted), a closing load queued for the processor whose
/// settings say `missing` = MAKE_MANUAL when `make_manual`, else DELETE, and every other load
/// of the feed queued for cleanup (its whole history goes). Removed again: the closing load
/// made the first time (idempotent). Errors: not_found.
caf::expected<feed_removal> remove_feed(pg_pool& pool, const std::string& seller_id,
                                        const std::string& ns, bool make_manual);

/// A feed; not_found when there is none (a removed one is returned, `removed` set).
caf::expected<feed_row> get_feed(pg_pool& pool, const std::string& seller_id,
                                 const std::string& ns);

/// A seller's feeds by namespace (at most 1000).
caf::expected<std::vector<feed_row>> list_feeds(pg_pool& pool, const std::string& seller_id,
                                                bool include_removed);

/// A feed's loads, newest first: those older than `before_load_id` (0: from the newest), at
/// most `limit`.
caf::expected<std::vector<feed_load_row>> list_feed_loads(pg_pool& pool,
                                                          const std::string& seller_id,
                                                          const std::string& ns,
                                                          int64_t before_load_id, int limit);

/// Which per-offer errors of a load: by level and type (empty: any), after the row
/// (after_external_id, after_error_id) in that order.
struct feed_error_query {
  std::string seller_id;
  int64_t load_id = 0;
  std::string level;
  std::string type;
  std::string after_external_id;
  int64_t after_error_id = -1; ///< with an empty after_external_id and -1: from the first
  int limit = 100;
};

struct feed_error_page {
  std::vector<feed_offer_error> errors;
  int64_t total = 0; ///< the load's rows matching level and type (all pages)
};

/// One page of a load's errors, by (external_id, error_id), with the matching total.
caf::expected<feed_error_page> list_feed_errors(pg_pool& pool, const feed_error_query& q);

/// Every error of a load matching `q` (its `after_*` and `limit` ignored), in pages of
/// `page_size` read one short transaction each (a long export holds no snapshot), each handed
/// to `page` in order; `page` returning false stops early. Memory: one page.
caf::error
for_each_feed_error(pg_pool& pool, feed_error_query q, int page_size,
                    const std::function<bool(const std::vector<feed_offer_error>&)>& page);

/// What one cleanup step removed.
struct feed_cleanup {
  int64_t loads = 0;              ///< loads whose rows are gone
  std::vector<std::string> blobs; ///< stored files no load refers to any more: remove them now
};

/// The cleanup step (seed "Чистка старых данных", option 2): takes up to `limit` rows of
/// feed_old_loads in load order (rows another node cleans at the same time are skipped) and for
/// each deletes, in order, its per-offer errors, answered batches and statistics, then — when
/// no other load refers to the same stored file — names that file in `blobs`, then deletes the
/// load row (and a queue row, if any) and its feed_old_loads row; one transaction. The caller
/// removes the files named after the commit (a crash in between leaves a file no row names:
/// harmless, and never a row naming a removed file).
///
/// `used_elsewhere` (may be empty: nowhere): with several shard groups (ADR 0023) a file no
/// load of this database refers to is named only when this also says no other group's load
/// does (two sellers may upload the same bytes); asked before the commit, so an error of it
/// undoes the step (returned), and the loads are cleaned again at the next round.
caf::expected<feed_cleanup> clean_old_feed_loads(
  pg_pool& pool, int limit,
  const std::function<caf::expected<bool>(const std::string&)>& used_elsewhere = {});

/// Whether a load in this database refers to the stored file `sha256` (another group's
/// cleanup asks: `used_elsewhere` above).
caf::expected<bool> feed_file_in_use(pg_pool& pool, const std::string& sha256);

} // namespace gost::persistence
