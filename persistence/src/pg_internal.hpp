#pragma once
// Internal to persistence/: the libpqxx side of pg_pool. Never include from other folders.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include <pqxx/pqxx>

#include "gost/persistence/pg_pool.hpp"

namespace gost::persistence {

struct pg_pool::impl {
  struct slot {
    std::unique_ptr<pqxx::connection> conn;
    std::chrono::steady_clock::time_point last_used{};
    bool busy = false;
  };

  explicit impl(const pg_pool::options& o) : opts(o), slots(static_cast<size_t>(o.size)) {}

  const pg_pool::options& opts;
  std::mutex mtx;
  std::condition_variable cv;
  std::vector<slot> slots;
  pg_pool::observer_fn observer; ///< set before the pool is shared; read without a lock
};

/// Runs `fn` with a pooled connection. Maps libpqxx exceptions to db_errc values: a lost
/// connection is reopened once and `fn` retried (it must be a whole transaction, safe to
/// run again), then reported as `unavailable`.
caf::error with_connection(pg_pool& pool, const std::function<void(pqxx::connection&)>& fn);

/// Deletes the rows of `table` in `shards` whose `time_column` is older than `max_age_s`
/// seconds (one statement, outside a transaction: housekeeping's reapers); the count deleted.
/// `table` and `time_column` are the caller's constants, never input.
caf::expected<int64_t> reap_by_age(pg_pool& pool, const char* table, const char* time_column,
                                   const std::vector<uint32_t>& shards, int64_t max_age_s);

/// The SQLSTATE of a write a shard move's fence refuses (migration 0027, gost_move_fence):
/// db_errc::unavailable (retry: the writer's next try reaches the new group), never reported
/// to the pool's observer as an outage.
inline constexpr const char* move_fence_sqlstate = "GM001";

/// Converts the exception in flight to an error (call from a catch block).
caf::error current_exception_to_error();

/// Runs a write transaction `fn` that records `mark` (write_mark) before it commits. When the
/// connection is lost during COMMIT (pqxx::in_doubt_error), looks `mark` up on a new
/// connection (retrying while the database is away, up to the pool's acquire timeout) before
/// answering: no error when it committed, db_errc::unavailable when it did not (nothing was
/// written: safe to retry), db_errc::outcome_unknown only when the lookup could not be made.
caf::error commit_marked(pg_pool& pool, const std::string& mark,
                         const std::function<void(pqxx::connection&)>& fn);

/// A new random commit mark.
std::string new_commit_mark();

/// Records `mark` in the transaction (and now and then reaps old marks).
void write_mark(pqxx::transaction_base& tx, const std::string& mark);

/// What write_mark runs, as statements ending in ';' for a caller to send in the same round
/// trip as a statement of its own (`tx.exec(mark_statements(tx, mark) + "SELECT ...")`: the
/// result is the last statement's).
std::string mark_statements(pqxx::transaction_base& tx, const std::string& mark);

} // namespace gost::persistence
