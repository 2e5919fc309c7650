#pragma once
// The worker of one shard, as plain steps over the database (seed 001's sync iteration, ADR
// 0011). Each step is one transaction fenced by the lease epoch; between the steps of an
// attempt (begin, the side effect, finish) a crash loses nothing: the row was rescheduled to
// the retry time before acting, and the next begin recounts the interrupted attempt. The
// worker actor (and the tests, deterministically) drive these steps.
//
// Owner: one worker per shard and lease; not thread-safe.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gost/persistence/scheduled/actions.hpp"
#include "gost/scheduled/rules.hpp"

namespace gost::persistence {
class pg_pool;
}

namespace gost::scheduled {

/// One attempt to carry out: what to do, under which key, within which deadline.
struct attempt {
  std::string action_id;
  int64_t scheduled_at_ms = 0; ///< the occurrence
  int32_t number = 0;          ///< 1-based, within the occurrence
  bool run_now = false;        ///< asked by RunNow (the occurrence is the time it was asked)
  int64_t deadline_ms = 0;
  std::string idempotency_key; ///< `<id>/<scheduled_at_ms>`: the same for every retry
  v1::ScheduledActionSpec spec;
};

/// The attempt log entry of an attempt found interrupted, recorded at `now_ms` by `node`.
persistence::attempt_record interrupted_record(const interrupted_attempt& i, int64_t now_ms,
                                               const std::string& node);

/// Carries out an attempt; returns the error (empty: success).
using fire_fn = std::function<std::string(const attempt&)>;

/// What an iteration did.
struct iteration_stats {
  int64_t moved = 0;
  int64_t dropped = 0;
  int64_t fired = 0;
  int64_t failed = 0;
  int64_t recounted = 0;
  bool fenced = false; ///< the lease is gone: stop the worker
};

class worker_steps {
public:
  worker_steps(persistence::pg_pool& pool, persistence::scheduled_lease lease, rules_options opts,
               std::function<int64_t()> clock_ms)
    : pool_(pool), lease_(lease), opts_(opts), clock_ms_(std::move(clock_ms)) {}

  const persistence::scheduled_lease& lease() const noexcept { return lease_; }

  /// The node named in the attempt log entries this worker writes.
  void set_node(std::string node) { node_ = std::move(node); }

  /// Starts a sync iteration: a new guid, recorded on the rows it moves or reschedules.
  const std::string& new_sync();
  const std::string& sync_guid() const noexcept { return sync_; }

  /// Moves one incoming row (per row, as the seed says: no conflicts with the API's inserts).
  caf::expected<persistence::step_outcome> move_one();

  /// Moves up to `limit` incoming rows in one transaction (ADR 0015).
  caf::expected<persistence::move_counts> move_batch(size_t limit);

  /// The processing rows due now, at most `limit`.
  caf::expected<std::vector<persistence::due_row>> due(size_t limit);

  /// Before acting on `row`: recounts an interrupted attempt, and when the occurrence is due
  /// records the attempt and reschedules the row to its retry time. `*act` gets the attempt to
  /// carry out, if any.
  caf::expected<persistence::step_outcome>
  begin(const persistence::due_row& row, std::optional<attempt>* act, bool* recounted = nullptr);

  /// After acting: the outcome counted (nothing when the action changed meanwhile).
  caf::expected<persistence::step_outcome> finish(const persistence::due_row& row, const attempt& a,
                                                  const std::string& error);

  /// begin() for many due rows in one transaction: `(*acts)[i]` gets row i's attempt, if any;
  /// `*recounted` counts the interrupted attempts found. One outcome per row, or one `fenced`.
  caf::expected<std::vector<persistence::step_outcome>>
  begin_batch(const std::vector<persistence::due_row>& rows,
              std::vector<std::optional<attempt>>* acts, int64_t* recounted);

  /// finish() for many attempts in one transaction: `errors[i]` is the outcome of
  /// `attempts[i]` on `rows[i]`.
  caf::expected<std::vector<persistence::step_outcome>>
  finish_batch(const std::vector<persistence::due_row>& rows, const std::vector<attempt>& attempts,
               const std::vector<std::string>& errors);

  /// Deletes stale parked rows of the shard.
  caf::expected<int64_t> sweep();

  /// One sync iteration: a new guid, the incoming rows moved (at most `max_moves`, one
  /// transaction), then up to `max_fires` due rows begun in one transaction, fired one after
  /// the other through `fire`, and finished in one transaction (or one per second of firing,
  /// when the actions are slow): a crash in between recounts the begun ones (ADR 0015).
  caf::expected<iteration_stats> iterate(const fire_fn& fire, size_t max_moves, size_t max_fires);

private:
  persistence::pg_pool& pool_;
  persistence::scheduled_lease lease_;
  rules_options opts_;
  std::function<int64_t()> clock_ms_;
  std::string sync_;
  std::string node_;
};

} // namespace gost::scheduled
