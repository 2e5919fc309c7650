#pragma once
// The tables of scheduled actions (migration 0015, ADR 0011, seed 001): the API's side
// (create / change / delete / read, each change a new guid and one incoming row, never a queue
// row deleted) and the worker's steps, each one transaction fenced by the shard's lease epoch.
// The rules (what the status becomes, when a row is due) are the caller's: gost/scheduled/.

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <caf/expected.hpp>

#include "gost/persistence/errors.hpp"
#include "gost/v1/scheduled_actions.pb.h"

namespace gost::persistence {

class pg_pool;

/// One entry of an action's attempt log (table scheduled_attempts, migration 0017).
struct attempt_record {
  int64_t at_ms = 0;         ///< when the outcome was recorded
  int64_t occurrence_ms = 0; ///< the occurrence fired
  int32_t attempt = 0;       ///< 1-based within the occurrence
  std::string outcome;       ///< ok, failed, gave_up, interrupted
  std::string error;
  std::optional<int64_t> duration_ms; ///< none: unknown (interrupted)
  std::string node;
  std::optional<int64_t> shard; ///< the worker's shard and lease epoch; none: a verb's recount
  std::optional<int64_t> epoch;
  bool run_now = false;
};

/// How many attempts the log keeps per action (older ones are deleted as new ones come).
constexpr int64_t attempts_kept = 20;

// --- the API's side -------------------------------------------------------------------------
// Each write holds the lease rows of the shards it writes (FOR SHARE): its incoming rows'
// shards and its actions' home shards (`shard_of(id)`: a move of a part of a group takes an
// action by its home, its queue rows being on shards drawn in the group), and is refused
// db_errc::unavailable ("retry in a moment") while a move fences one (ADR 0023): the API has
// no lease of its own, so this is what keeps its writes out of a moving group's last copy.

/// Stores a new action (its meta.guid set by the caller) and its incoming row in shard
/// `incoming_shard`; `home_shard`: its id's shard. db_errc::already_exists when the id is
/// taken.
caf::error create_scheduled_action(pg_pool& pool, const v1::ScheduledAction& action,
                                   uint32_t incoming_shard, uint32_t home_shard);

/// Stores new actions (meta.guid set by the caller), each with its incoming row in the shard
/// paired with it, in one transaction: all or none (the scheduler's bulk create).
/// `home_shards`: their ids' shards. db_errc::already_exists naming a taken id: nothing stored.
caf::error
create_scheduled_actions(pg_pool& pool,
                         const std::vector<std::pair<v1::ScheduledAction, uint32_t>>& actions,
                         const std::set<uint32_t>& home_shards);

/// Locks action `id` (whose id's shard is `home_shard`), lets `change` edit it (an error
/// refuses: nothing written), and stores it with an incoming row for its guid (`change` sets
/// the new one) in shard `incoming_shard`,
/// and the attempt log entries `change` left in `*records` (if given). A change that keeps the
/// guid writes nothing (a verb finding the action as asked already). Returns the action as
/// stored; db_errc::not_found when there is none.
caf::expected<v1::ScheduledAction>
change_scheduled_action(pg_pool& pool, const std::string& id,
                        const std::function<caf::error(v1::ScheduledAction&)>& change,
                        uint32_t incoming_shard, uint32_t home_shard,
                        std::vector<attempt_record>* records = nullptr);

/// The attempt log of `id`, newest first, at most `limit`.
caf::expected<std::vector<attempt_record>> attempts_of(pg_pool& pool, const std::string& id,
                                                       size_t limit);

/// A part of a group moving (shards `first`..`last`, ADR 0023 "Splits"), at its fence: an
/// action's queue rows are on a shard drawn in its home group, not on its home shard, so the
/// move would take an action and leave its rows (or the reverse). Each action whose current
/// rows are on the other side of the range than its home shard (`gost_shard_of(id,
/// shard_count)`) is given a new guid and a new incoming row on its home shard, as an update by
/// the API would: its old rows become stale (their workers drop them; a firing in flight with
/// the old guid records nothing, and the occurrence fires again from the new row: at least
/// once, the occurrence's idempotency key unchanged). Run with the range fenced (its workers
/// stopped, the API's writes refused). Answers the actions re-homed.
caf::expected<int64_t> rehome_scheduled_actions(pg_pool& pool, uint32_t first, uint32_t last,
                                                uint32_t shard_count);

/// Deletes action `id` (its queue rows become stale); false when there was none. `home_shard`:
/// the shard of its id, whose lease row tells whether a move fences the action's group.
caf::expected<bool> delete_scheduled_action(pg_pool& pool, const std::string& id,
                                            uint32_t home_shard);

caf::expected<std::optional<v1::ScheduledAction>> get_scheduled_action(pg_pool& pool,
                                                                       const std::string& id);

/// A queue row (either queue).
struct scheduled_queue_row {
  bool processing = false; ///< else incoming
  uint32_t shard = 0;
  std::string action_id;
  std::string action_guid;
  std::optional<int64_t> scheduled_at_ms; ///< processing: none = parked
};

/// The queue rows carrying `id` and `guid` (the invariant: exactly one for a live action).
caf::expected<std::vector<scheduled_queue_row>> queue_rows_of(pg_pool& pool, const std::string& id,
                                                              const std::string& guid);

struct scheduled_filter {
  bool due = false;     ///< only actions whose status_scheduled_at_ms <= now_ms
  bool failing = false; ///< only actions with failures_in_row > 0
  bool paused = false;  ///< only paused actions
  int64_t now_ms = 0;
};

/// Actions by id after `after_id` (exclusive), at most `limit`, in byte order (collation "C",
/// whatever the database's).
caf::expected<std::vector<v1::ScheduledAction>>
list_scheduled_actions(pg_pool& pool, const std::string& after_id, size_t limit,
                       const scheduled_filter& filter);

// --- the worker's steps ---------------------------------------------------------------------

/// The lease a worker works under: every step writes only while the shard's lease is at
/// this epoch and names this owner (checked with FOR SHARE in the step's own transaction; the
/// owner too, since an epoch can be issued twice after a failover lost its bump, ADR 0023 §6).
struct scheduled_lease {
  uint32_t shard = 0;
  int64_t epoch = 0;
  std::string owner; ///< the worker's node id
};

enum class step_outcome : uint8_t {
  none,    ///< nothing to do (no incoming row), or nothing written
  moved,   ///< an incoming row moved to processing
  dropped, ///< a stale row deleted
  done,    ///< the action was updated and its row rescheduled
  fenced,  ///< the lease is at another epoch: nothing written
};

const char* to_string(step_outcome x);

/// Moves the oldest incoming row of the lease's shard (one row, one transaction): into
/// processing when its guid is current (due at the action's status_scheduled_at_ms, or
/// parked), else only deleted. `sync_guid` is recorded on the moved row.
caf::expected<step_outcome> move_one_incoming(pg_pool& pool, const scheduled_lease& lease,
                                              const std::string& sync_guid);

/// What a batched move did.
struct move_counts {
  int64_t moved = 0;   ///< rows now in processing
  int64_t dropped = 0; ///< stale rows deleted
  bool fenced = false; ///< the lease is at another epoch: nothing written
};

/// Moves up to `limit` of the oldest incoming rows of the lease's shard in one transaction,
/// each as move_one_incoming does (ADR 0015: a bounded batch, not a row per transaction).
/// Incoming rows another step holds are skipped; an action an API change holds is waited
/// for, so the guid compared is the one at commit.
caf::expected<move_counts> move_incoming(pg_pool& pool, const scheduled_lease& lease,
                                         const std::string& sync_guid, size_t limit);

/// A processing row due at or before `now_ms`.
struct due_row {
  std::string action_id;
  std::string action_guid;
  int64_t scheduled_at_ms = 0;
};

/// The processing rows of `shard` due by `now_ms`, earliest first, at most `limit`.
caf::expected<std::vector<due_row>> due_rows(pg_pool& pool, uint32_t shard, int64_t now_ms,
                                             size_t limit);

/// What a shard's worker has to do, in one cheap read (an idle worker's poll).
struct shard_work {
  bool incoming = false;           ///< rows to move
  std::optional<int64_t> next_due; ///< the earliest due processing row
};
caf::expected<shard_work> look_at_shard(pg_pool& pool, uint32_t shard);

/// look_at_shard for many shards in one read (a node's poller: one read per poll period for
/// all its shards, ADR 0015); one entry per shard, in the order given.
caf::expected<std::vector<shard_work>> look_at_shards(pg_pool& pool,
                                                      const std::vector<uint32_t>& shards);

/// What a worker step does to an action it locked.
struct action_change {
  bool write = false;                  ///< false: nothing written
  std::optional<int64_t> due_ms;       ///< the row's new due time; none: parked
  std::vector<attempt_record> records; ///< attempt log entries written with it
};

/// Locks `row`'s action in a transaction fenced by `lease`: a missing action or another guid
/// makes the row stale (deleted: `dropped`); otherwise `fn` edits the action and says how to
/// reschedule its row (`sync_guid` recorded; `done`, or `none` when `fn` wrote nothing), and
/// `*out` gets the action as `fn` left it.
caf::expected<step_outcome> update_due_action(
  pg_pool& pool, const scheduled_lease& lease, const due_row& row, const std::string& sync_guid,
  const std::function<action_change(v1::ScheduledAction&)>& fn, v1::ScheduledAction* out);

/// update_due_action for many rows in one transaction (fenced once): `fn(i, action)` for
/// each row `rows[i]` whose guid is current, in the order of `rows`; the worker writes only
/// the status (and its query columns), the rows' due times and the changes' attempt log
/// entries (one statement each, the logs trimmed as write-time does per action). Returns one
/// outcome per row
/// (`dropped`, `done` or `none`), or a single `fenced`; `*out` (when given) gets the actions
/// as `fn` left them, empty for dropped rows.
caf::expected<std::vector<step_outcome>>
update_due_actions(pg_pool& pool, const scheduled_lease& lease, const std::vector<due_row>& rows,
                   const std::string& sync_guid,
                   const std::function<action_change(size_t, v1::ScheduledAction&)>& fn);

/// Deletes the parked processing rows of the lease's shard whose guid is stale (a parked row
/// is never due, so it is never seen otherwise). Returns how many; -1 when fenced.
caf::expected<int64_t> sweep_parked(pg_pool& pool, const scheduled_lease& lease);

} // namespace gost::persistence
