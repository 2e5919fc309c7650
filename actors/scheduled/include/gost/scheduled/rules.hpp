#pragma once
// The rules of scheduled actions (seed 001, ADR 0011), plain C++ over the stored messages, no
// CAF and no database: what a valid action is (errors name the field), when it fires next
// (once, a fixed interval or a cron expression), how an attempt is retried, and how the
// status moves through an attempt — begin (before acting: the row is rescheduled to the retry
// time), finish (the outcome counted), and the recount of an attempt a crash interrupted.
// The worker's steps (worker_steps.hpp) apply them inside fenced transactions.

#include <cstdint>
#include <optional>
#include <string>

#include "gost/v1/scheduled_actions.pb.h"

namespace gost::scheduled {

/// The `scheduled.*` settings the rules read.
struct rules_options {
  bool allow_private_targets = false; ///< HTTP to loopback/private addresses allowed
  int32_t default_max_attempts = 5;
  int64_t default_backoff_ms = 1'000;
  int64_t default_deadline_ms = 10'000;
  int64_t min_interval_ms = 10;
};

/// A refused request: the field to change and why.
struct field_error {
  std::string field; ///< e.g. `spec.cron`
  std::string message;
  std::string text() const { return field + ": " + message; }
};

/// An action id: 1..128 letters, digits, '.', '_', '-' or ':'.
std::optional<field_error> check_id(const std::string& id);

/// The first problem of `spec`, or none. `now_ms` is the time of the request.
std::optional<field_error> check_spec(const v1::ScheduledActionSpec& spec,
                                      const rules_options& opts, int64_t now_ms);

/// The occurrence at or after the start (`start_at_ms`, 0: `now_ms`), or none (past the end).
std::optional<int64_t> first_occurrence(const v1::ScheduledActionSpec& spec, int64_t now_ms);

/// The occurrence strictly after `after_ms`, or none (once, or past the end).
std::optional<int64_t> next_occurrence(const v1::ScheduledActionSpec& spec, int64_t after_ms);

/// A spec's retry policy with the defaults filled in.
struct retry_settings {
  int32_t max_attempts = 5;
  int64_t backoff_ms = 1'000;
  int64_t max_backoff_ms = 32'000;
  int64_t deadline_ms = 10'000;
};
retry_settings effective_retry(const v1::ScheduledActionSpec& spec, const rules_options& opts);

/// The wait after the `attempt`-th failed attempt (1-based): backoff × 2^(attempt-1), capped.
int64_t retry_delay_ms(const retry_settings& r, int32_t attempt);

/// The header value an occurrence's attempts carry: `<id>/<scheduled time in ms>`.
std::string idempotency_key(const std::string& action_id, int64_t scheduled_at_ms);

/// A new status for a created or updated action: counters and a pause of `previous` kept
/// (none: zero), the schedule started over at the spec's first occurrence.
v1::ScheduledActionStatus start_status(const v1::ScheduledActionSpec& spec, int64_t now_ms,
                                       const v1::ScheduledActionStatus* previous);

/// An attempt found interrupted and counted as failed (for the attempt log).
struct interrupted_attempt {
  int64_t occurrence_ms = 0;
  int32_t attempt = 0;
  bool run_now = false;
  bool gave_up = false; ///< it was the occurrence's last attempt
};

/// The seed's Recalc: an attempt left in flight (a crash, a lost lease, or a verb that changed
/// the action under it) is counted as failed, as it would have been had it returned an error;
/// past max_attempts its occurrence is given up. A run-now attempt is not retried. None when
/// no attempt is in flight.
std::optional<interrupted_attempt> recount_interrupted(v1::ScheduledActionStatus& st,
                                                       const v1::ScheduledActionSpec& spec,
                                                       const rules_options& opts, int64_t now_ms);

/// The operator's verbs. Each first recounts an attempt in flight into `*recounted` (the verb's
/// new guid makes the worker drop that attempt's outcome). False: nothing to change (paused,
/// resumed, or a run-now pending already); `run_now` also returns false on a paused action,
/// with `*refusal` saying so. Pause drops a pending run-now; resume keeps the schedule, so
/// occurrences missed while paused coalesce into one firing at once; run-now asks for one
/// attempt now (its occurrence: now), outside the schedule.
bool pause(v1::ScheduledActionStatus& st, const v1::ScheduledActionSpec& spec,
           const rules_options& opts, int64_t now_ms, const std::string& who,
           std::optional<interrupted_attempt>* recounted);
bool resume(v1::ScheduledActionStatus& st, const v1::ScheduledActionSpec& spec,
            const rules_options& opts, int64_t now_ms,
            std::optional<interrupted_attempt>* recounted);
bool run_now(v1::ScheduledActionStatus& st, const v1::ScheduledActionSpec& spec,
             const rules_options& opts, int64_t now_ms,
             std::optional<interrupted_attempt>* recounted, std::string* refusal);

/// What the worker does with a due row after `begin_attempt`.
struct begin_result {
  bool act = false;              ///< fire now (the attempt is recorded as in flight)
  bool run_now = false;          ///< the attempt is a run-now (occurrence: `run_now_at_ms`)
  std::optional<int64_t> due_ms; ///< the row's new due time (none: parked, nothing left)
  bool recounted = false;        ///< an interrupted attempt was found and counted
  std::optional<interrupted_attempt> interrupted; ///< which, when recounted
};

/// Before acting on a due action. An attempt left in flight (a crash) is counted as failed
/// first. If the occurrence is still due, the attempt is recorded as in flight and the row is
/// to be rescheduled to its retry time (so a crash now retries it).
begin_result begin_attempt(v1::ScheduledActionStatus& st, const v1::ScheduledActionSpec& spec,
                           const rules_options& opts, int64_t now_ms);

/// After acting: the outcome counted; returns the row's new due time (none: parked). A
/// run-now attempt (`run_now_at_ms` set) is counted once, not retried, and leaves the schedule
/// as it was (a retry pending then waits its back-off from the run-now).
std::optional<int64_t> finish_attempt(v1::ScheduledActionStatus& st,
                                      const v1::ScheduledActionSpec& spec,
                                      const rules_options& opts, int64_t now_ms, bool ok,
                                      const std::string& error);

} // namespace gost::scheduled
