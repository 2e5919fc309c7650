#include "gost/persistence/pg_pool.hpp"

#include <thread>

#include "pg_internal.hpp"

namespace gost::persistence {

namespace {

using clock_type = std::chrono::steady_clock;

// SQLSTATE classes: 23505 unique_violation, 40001 serialization_failure, 40P01 deadlock,
// 08* connection exceptions, 57P0* admin shutdown / crash shutdown / cannot connect now.
db_errc classify(const std::string& sqlstate) {
  if (sqlstate == "23505")
    return db_errc::already_exists;
  if (sqlstate == "40001" || sqlstate == "40P01")
    return db_errc::conflict;
  if (sqlstate.rfind("08", 0) == 0 || sqlstate.rfind("57P", 0) == 0)
    return db_errc::unavailable;
  if (sqlstate.rfind("22", 0) == 0 || sqlstate == "23502" || sqlstate == "23514")
    return db_errc::invalid_argument;
  return db_errc::internal;
}

} // namespace

caf::error current_exception_to_error() {
  try {
    throw;
  } catch (const pqxx::broken_connection& e) {
    return make_db_error(db_errc::unavailable, std::string{"database connection lost: "} + e.what());
  } catch (const pqxx::in_doubt_error& e) {
    return make_db_error(db_errc::unavailable, std::string{"commit outcome unknown: "} + e.what());
  } catch (const pqxx::sql_error& e) {
    return make_db_error(classify(e.sqlstate()), std::string{e.what()} + " [" + e.sqlstate() + "]");
  } catch (const std::exception& e) {
    return make_db_error(db_errc::internal, e.what());
  }
}

pg_pool::pg_pool(options opts) : opts_(std::move(opts)), impl_(std::make_unique<impl>(opts_)) {}

pg_pool::~pg_pool() = default;

caf::error pg_pool::wait_ready(std::chrono::milliseconds timeout) {
  auto deadline = clock_type::now() + timeout;
  caf::error last;
  for (;;) {
    last = ping();
    if (!last)
      return last;
    if (clock_type::now() >= deadline)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds{200});
  }
  return make_db_error(db_errc::unavailable,
                       "cannot reach PostgreSQL at pg.dsn=\"" + opts_.dsn + "\" within "
                         + std::to_string(timeout.count()) + "ms (" + error_message(last)
                         + "); start the server, fix `pg.dsn`, or leave `pg.dsn` empty for the "
                           "embedded server");
}

caf::error pg_pool::ping() {
  return with_connection(*this, [](pqxx::connection& c) {
    pqxx::nontransaction tx{c};
    tx.exec("SELECT 1");
  });
}

caf::error with_connection(pg_pool& pool, const std::function<void(pqxx::connection&)>& fn) {
  auto& p = pool.internals();
  size_t idx = 0;
  {
    std::unique_lock<std::mutex> guard{p.mtx};
    auto free_slot = [&] {
      for (size_t i = 0; i < p.slots.size(); ++i)
        if (!p.slots[i].busy) {
          idx = i;
          return true;
        }
      return false;
    };
    if (!p.cv.wait_for(guard, p.opts.acquire_timeout, free_slot))
      return make_db_error(db_errc::unavailable,
                           "all " + std::to_string(p.slots.size())
                             + " database connections stayed busy for "
                             + std::to_string(p.opts.acquire_timeout.count())
                             + "ms; raise `pg.pool_size` or reduce load");
    p.slots[idx].busy = true;
  }
  auto& s = p.slots[idx];
  auto release = [&] {
    s.last_used = clock_type::now();
    std::lock_guard<std::mutex> guard{p.mtx};
    s.busy = false;
    p.cv.notify_one();
  };
  caf::error result;
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      if (s.conn && !s.conn->is_open())
        s.conn.reset();
      if (s.conn && clock_type::now() - s.last_used > p.opts.idle_check_after) {
        // A connection idle for long may have been cut by a proxy or a server restart.
        try {
          pqxx::nontransaction tx{*s.conn};
          tx.exec("SELECT 1");
        } catch (const pqxx::broken_connection&) {
          s.conn.reset();
        }
      }
      if (!s.conn)
        s.conn = std::make_unique<pqxx::connection>(pool.opts().dsn);
      fn(*s.conn);
      result = caf::error{};
      break;
    } catch (const pqxx::broken_connection&) {
      result = current_exception_to_error();
      s.conn.reset();
      continue; // reopen and try once more
    } catch (...) {
      result = current_exception_to_error();
      if (s.conn && !s.conn->is_open())
        s.conn.reset();
      break;
    }
  }
  release();
  return result;
}

} // namespace gost::persistence
