#pragma once
// The offer store's bookkeeping of feed loads (migration 0007, docs/feeds.md): tasks, the
// external ids each load carried, and the seller's offers a load did not carry.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gost/persistence/errors.hpp"

namespace gost::persistence {

class pg_pool;
class shard_placement;

struct feed_task {
  bool finished = false;
  std::string summary; ///< serialized gost.v1.FeedSummary, when finished
  /// Set when the task id is already another seller's or namespace's ("seller/namespace"):
  /// the request must be refused, never applied to the other load.
  std::string other_owner;
};

/// Registers the task (seller, namespace) unless known; returns its state.
caf::expected<feed_task> begin_feed_task(pg_pool& pool, const std::string& task_id,
                                         const std::string& seller_id, const std::string& ns);

/// What a load already knew of an external id.
enum class feed_item : uint8_t {
  fresh,     ///< first seen now, in this batch
  again,     ///< seen before in this same batch (a re-delivered batch)
  duplicate, ///< seen before in another batch of the load
};

/// Records the external ids of a batch (in order; an id twice in one batch is a duplicate the
/// second time) and says what each was.
caf::expected<std::vector<feed_item>>
record_feed_items(pg_pool& pool, const std::string& task_id, const std::string& batch_id,
                  const std::vector<std::string>& external_ids);

/// Outcome counts of a batch, added to the task's.
struct feed_counts {
  int64_t added = 0;
  int64_t updated = 0;
  int64_t unchanged = 0;
  int64_t rejected = 0;
  int64_t duplicates = 0;
};

/// A batch as recorded: what each external id was, and whether this was the batch's first
/// recording (then its counts were added with it).
struct recorded_batch {
  std::vector<feed_item> items;
  bool first_time = false;
};

/// record_feed_items, and the first time the batch is recorded (no feed_batches row yet) adds
/// `count(items)` to the task's counts in the same transaction: a batch handled again, after a
/// crash or re-delivered, adds nothing.
caf::expected<recorded_batch>
record_feed_batch(pg_pool& pool, const std::string& task_id, const std::string& batch_id,
                  const std::vector<std::string>& external_ids,
                  const std::function<feed_counts(const std::vector<feed_item>&)>& count);

/// A stored offer as the feed exchange needs it.
struct keyed_offer {
  std::string offer_id;
  std::string external_id;
  int64_t version = 0;
  std::string body; ///< serialized gost.v1.Offer
};

/// The seller's offers under these external ids (in `ns`), in any order. `pool` is the
/// seller's home database. With `where` (the groups' databases), the offers a split left in
/// other groups' databases are found too: their keys' claims (`offer_keys`) and the shards the
/// seller's offers were spread to (`seller_spread`) come in the home query's round trip, and
/// each database holding such a shard now is read by the claimed ids, in one query (none when
/// the seller has no spread row, ADR 0023). A claim whose offer is gone or no longer has the
/// key finds nothing.
caf::expected<std::vector<keyed_offer>>
find_by_external_ids(pg_pool& pool, const std::string& seller_id, const std::string& ns,
                     const std::vector<std::string>& external_ids,
                     const shard_placement* where = nullptr);

/// The seller's offers in `ns` with an external id the task did not carry, in id byte order.
/// `pool` is the seller's home database (where the task's items are); with `where`, the
/// seller's offers in the databases holding its spread shards are read too and checked against
/// the task's items at home.
caf::expected<std::vector<keyed_offer>>
offers_missing_from(pg_pool& pool, const std::string& task_id, const std::string& seller_id,
                    const std::string& ns, const shard_placement* where = nullptr);

/// Adds `n` (which may be negative: corrections) to the task's counts.
caf::error add_feed_counts(pg_pool& pool, const std::string& task_id, const feed_counts& n);

/// The task's counts so far and its distinct batches.
caf::expected<std::pair<feed_counts, int32_t>> feed_progress(pg_pool& pool,
                                                             const std::string& task_id);

/// Marks the task finished with its summary and forgets its items.
caf::error finish_feed_task(pg_pool& pool, const std::string& task_id, const std::string& summary);

} // namespace gost::persistence
