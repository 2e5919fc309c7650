#pragma once
// The write side of the write-behind layer: many write-sets of one shard committed in one
// transaction, fenced by the shard's lease epoch. The actor that batches them lives in actors/.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gost/persistence/errors.hpp"
#include "gost/persistence/queue.hpp"
#include "gost/persistence/writes.hpp"

namespace gost::persistence {

class pg_pool;

// Queue entries of offers: lane = stage id, entity_id = offer id (gost/persistence/queue.hpp).

/// A dead letter: an event that is not retried until an operator releases it.
struct dead_letter {
  std::string stage_id;
  std::string reason;
  int32_t attempts = 1;
};

/// What a write-set does to the offer row.
enum class offer_op : uint8_t {
  change, ///< checked against expected_version; new_body when the offer changed
  insert, ///< a new offer (new_body at version 1); conflict when the id or seller key exists
  remove, ///< deletes the offer with its states and queue entries, checked against expected_version
  none,   ///< queue and dead-letter bookkeeping only, no version check (shard-made sets)
};

/// The seller key columns of an offer row: set by offer_op::insert, and by a change with
/// `rekey` (an update that gave the offer another seller, namespace or external id).
struct offer_key_columns {
  std::string seller_id;
  std::string ns;
  std::string external_id; ///< empty: NULL
};

/// Everything one event of one offer changes, applied all or nothing.
struct write_set {
  std::string offer_id;
  /// The version the event computed on; the set is rejected (conflict) unless the offer is
  /// still at this version when the batch commits.
  int64_t expected_version = 0;
  /// New offer body (serialized gost.v1.Offer) at `expected_version + 1`, when it changed.
  std::optional<std::string> new_body;
  /// (stage id, serialized google.protobuf.Any) to upsert; each adds one to the state's version.
  std::vector<std::pair<std::string, std::string>> states;
  /// Stage ids whose queue entry for this offer was consumed by the event.
  std::vector<std::string> dequeue;
  /// Entries to put into queues: an existing entry keeps the earlier due time and the higher
  /// priority (an offer is in a queue at most once).
  std::vector<queue_entry> enqueue;
  /// Outbox event (a serialized gost.v1.OfferSaved: the saved offer and states) when
  /// something changed. The events of a batch go into one outbox_batches row, in order.
  std::optional<std::string> outbox;
  offer_op op = offer_op::change;
  offer_key_columns key; ///< offer_op::insert, or offer_op::change with `rekey`
  /// The change gives the offer the seller key `key`: the row's key columns follow its body.
  /// When another offer holds that key the set is write_outcome::key_taken.
  bool rekey = false;
  /// With `rekey`: the seller the offer had before the change (its key's home, when
  /// commit_options::home_shard is set, must be in this database as the new key's must).
  std::string previous_seller;
  std::vector<dead_letter> dead_letters;
  /// A request id (client's or forwarding node's): the set commits at most once per
  /// (offer, request id); a later set with the same id is `duplicate` and applies nothing.
  /// Committed with `answer`, what the caller was answered (found again by find_answer).
  std::string request_id;
  std::string answer;
};

/// The answer stored with request `request_id` of offer `offer_id`; none when no such write
/// committed (or it was reaped).
caf::expected<std::optional<std::string>> find_answer(pg_pool& pool, const std::string& offer_id,
                                                      const std::string& request_id);

/// Forgets request ids of `shards` older than `max_age_s` seconds; how many went.
caf::expected<int64_t> reap_requests(pg_pool& pool, const std::vector<uint32_t>& shards,
                                     int64_t max_age_s);

/// Commits `sets` (in order; several may touch the same offer; any mix of shards) in one
/// transaction, each fenced by its own shard's lease: the lease row must name `owner` (the
/// writing node's id) at the set's epoch, both compared (ADR 0023 §6), and says what happened
/// to each (a set of a shard this node no longer holds at that epoch is `fenced`, one whose request
/// id committed before is `duplicate`, the others commit or conflict as usual). An error means
/// nothing was committed: when the connection is lost during COMMIT the batch's commit mark is
/// looked up on a new connection first, and db_errc::outcome_unknown is returned only when
/// that could not be done in time.
/// How a batch is committed.
struct commit_options {
  /// Also keep each committed set's outbox event in the offer's history (offer_history,
  /// gost/persistence/offers/history.hpp), in the statement that writes the outbox rows.
  bool history = false;
  /// A seller's home shard (gost::shard_of(seller_id, shard_count)). When set, a new offer's
  /// insert holds that shard's lease row (FOR KEY SHARE, in the fence's statement) and is
  /// write_outcome::home_moved unless the row is this database's (present, not marked moved to
  /// another group's database): a split's fence (which locks the row FOR UPDATE) waits for
  /// inserts in flight, and none after it makes an offer outside its seller's home group that
  /// the fence did not see (ADR 0023, "Splits") — neither at the source nor, its id drawn with
  /// the old map and its shard moved meanwhile, at the target. A change of an offer's key holds the
  /// home shards of its old and new seller the same way and is write_outcome::key_elsewhere unless
  /// both are this database's (a lease row here that no split marked moved): an offer outside its
  /// seller's home group cannot change its key where it is. Unset: no such check (tests and
  /// benchmarks on one database).
  std::function<uint32_t(const std::string& seller_id)> home_shard;
};

caf::expected<std::vector<write_outcome>>
commit_write_sets(pg_pool& pool, const std::vector<fenced_write<write_set>>& sets,
                  const std::string& owner, commit_options opts = {});

/// Takes every shard's lease for `owner` at once, bumping each epoch, and returns the epochs
/// indexed by shard. For tests and benchmarks that run shards without a cluster manager;
/// gostd takes leases one by one (cluster.hpp, docs/cluster.md).
caf::expected<std::vector<int64_t>> acquire_all_leases(pg_pool& pool, const std::string& owner,
                                                       uint32_t shard_count);

/// Queue entries of a shard due at or before `until_us`, in (due, stage, offer) order, at most
/// `limit`, starting after `after` when given (a cursor: the last entry of the previous page).
caf::expected<std::vector<queue_entry>> due_entries(pg_pool& pool, uint32_t shard, int64_t until_us,
                                                    size_t limit,
                                                    const queue_entry* after = nullptr);

/// A stored stage state with its version (0: never written; every write adds one).
struct stored_state {
  std::string stage_id;
  std::string bytes; ///< serialized google.protobuf.Any
  int64_t version = 0;
};

/// All stage states of an offer.
caf::expected<std::vector<stored_state>> load_states(pg_pool& pool, const std::string& offer_id);

/// Everything an offer actor needs when it activates.
struct offer_row {
  bool found = false;
  std::string body;    ///< serialized gost.v1.Offer
  int64_t version = 0; ///< authoritative (the column)
  std::vector<stored_state> states;
  std::vector<queue_entry> queued;
};

/// Loads many offers at once (two queries in all): rows in the order of `ids`.
caf::expected<std::vector<offer_row>> load_offers(pg_pool& pool,
                                                  const std::vector<std::string>& ids);

/// The ids of a shard's offers after `after_id` in id order, at most `limit` (a rescan page).
caf::expected<std::vector<std::string>> offer_ids_page(pg_pool& pool, uint32_t shard,
                                                       const std::string& after_id, size_t limit);

/// Queue and dead-letter counts of one stage, over all shards.
struct stage_counts {
  std::string stage_id;
  uint64_t queued = 0; ///< due at or before now
  uint64_t timers = 0; ///< due later
  uint64_t dead_letters = 0;
  int64_t oldest_due_us = 0; ///< due time of the oldest entry due at or before now; 0: none
};

/// Counts for every stage that has queue entries or open dead letters.
caf::expected<std::vector<stage_counts>> count_stages(pg_pool& pool, int64_t now_us);

/// The stages whose queue holds the offer (seed: Queue.check).
caf::expected<std::vector<queue_entry>> queued_for(pg_pool& pool, const std::string& offer_id);

} // namespace gost::persistence
