#pragma once
// What a node knows of a dependency it calls (PostgreSQL, Kafka), and how its loops pace
// themselves while one is away. Plain C++, no CAF.
//
// - `dependency_tracker`: fed by the one place that sees every call to the dependency (the
//   connection pool for PostgreSQL, the outbox relay for Kafka). The first failure logs one
//   "lost" line, later ones are counted and summarised every `summary_every` ("still"), the
//   first success after them logs one "back" line with how long it was gone. Components that
//   get such an error log nothing of their own (`db_outage_reported`): the tracker said it once.
//   Readiness reads `up()`; the metrics read `up()` and `failed_calls()`.
// - `retry_pace`: the wait of one loop (a shard's queue poll, the outbox relay): doubling
//   after each failure up to a cap, over at once when the dependency is seen back by any call
//   (`recoveries`), so the first poll after an outage does not sit out a long back-off.
//
// Owner and users: the node owns the trackers (shared_ptr) and hands them to the pool's
// observer, the shards, the writers, the relay and readiness; any thread calls them. A
// `retry_pace` belongs to the one actor or thread whose loop it paces.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include <caf/fwd.hpp>

#include "gost/core/backoff.hpp"

namespace gost {

class dependency_tracker {
public:
  using clock = std::chrono::steady_clock;

  /// The three lines a tracker writes.
  enum class line : uint8_t {
    lost,  ///< the first failed call: `NAME unreachable since=... error=...` (error level)
    still, ///< a summary while away: `NAME still unreachable for=... failed_calls=...` (warn)
    back,  ///< the first call through again: `NAME reachable again after=... failed_calls=...`
           ///< (info)
  };

  struct options {
    std::string name;            ///< `postgresql`, `kafka`: the first word of each line
    std::string logger = "node"; ///< the named logger (gost/core/log.hpp) the lines go to
    std::chrono::milliseconds summary_every{30'000};
    /// The clock of durations; tests inject one. Default: steady_clock.
    std::function<clock::time_point()> now;
    /// Where lines go; tests capture them. Default: the named logger at the line's level.
    std::function<void(line, const std::string&)> write;
  };

  explicit dependency_tracker(options opts);
  dependency_tracker(const dependency_tracker&) = delete;
  dependency_tracker& operator=(const dependency_tracker&) = delete;

  /// A call begun at `started` reached the dependency (whatever it answered). While it is
  /// up, this is one atomic load. A call begun before the loss was seen says nothing about
  /// now and is ignored.
  void succeeded(clock::time_point started);
  void succeeded() { succeeded(now()); }

  /// A call begun at `started` could not reach it; `error` says why (newlines become spaces).
  /// A call begun before the last recovery is counted but changes nothing (a leftover of the
  /// outage that ended).
  void failed(std::string_view error, clock::time_point started);
  void failed(std::string_view error) { failed(error, now()); }

  /// Reachable as far as the last call saw (true until a call failed).
  bool up() const noexcept { return up_.load(std::memory_order_acquire); }

  /// How many times it came back. A loop that waits out a failure looks at this to end its
  /// wait as soon as any call got through again (`retry_pace`).
  uint64_t recoveries() const noexcept { return recoveries_.load(std::memory_order_acquire); }

  /// Failed calls since the start (the metric).
  uint64_t failed_calls() const noexcept { return failed_total_.load(std::memory_order_relaxed); }

  /// How long it has been away; zero while up.
  clock::duration down_for() const;

  const std::string& name() const noexcept { return opts_.name; }

  clock::time_point now() const { return opts_.now ? opts_.now() : clock::now(); }

private:
  void write(line kind, const std::string& text);

  options opts_;
  std::atomic<bool> up_{true};
  std::atomic<uint64_t> recoveries_{0};
  std::atomic<uint64_t> failed_total_{0};
  mutable std::mutex mtx_;        // guards what follows; only failures and changes take it
  clock::time_point changed_at_;  ///< the last loss or recovery
  clock::time_point last_line_;   ///< of the last lost or still line
  uint64_t failed_in_outage_ = 0; ///< failed calls since the loss
  std::string last_error_;
};

/// Whether `err` is the database being unreachable (`db_errc::unavailable`) while `db`, its
/// tracker, is down: the tracker logged and counted it, so the caller writes no line of its
/// own. False without a tracker, so a component without one logs as before.
bool db_outage_reported(const dependency_tracker* db, const caf::error& err);

/// The pace of one loop that calls a dependency: its normal period while calls go through;
/// after a failure a wait from `first` doubling to `cap`, over as soon as the loop's own call
/// succeeds or any other call sees the dependency back. The loop keeps its timer and asks
/// `may_try` when it fires (no call is made, nothing is logged while it waits).
class retry_pace {
public:
  using clock = std::chrono::steady_clock;

  retry_pace(std::chrono::milliseconds first, std::chrono::milliseconds cap,
             std::shared_ptr<const dependency_tracker> dep = nullptr);

  /// An attempt failed at `now`; returns how long the loop waits before the next.
  std::chrono::milliseconds failed(clock::time_point now);

  /// An attempt went through: no more waiting, and the next failure waits `first` again.
  void succeeded();

  /// Whether the loop may try at `now`: it is not waiting, its wait is over, or the dependency
  /// came back since the failure.
  bool may_try(clock::time_point now) const;

  /// Whether the last attempt failed (and no success came since).
  bool failing() const noexcept { return failing_; }

private:
  backoff backoff_;
  std::shared_ptr<const dependency_tracker> dep_;
  clock::time_point retry_at_{};
  uint64_t recoveries_at_ = 0;
  bool failing_ = false;
};

} // namespace gost
