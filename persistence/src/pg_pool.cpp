#include "gost/persistence/pg_pool.hpp"

#include <algorithm>
#include <thread>

#include "gost/persistence/dedicated_pool.hpp"
#include "gost/persistence/random_id.hpp"
#include "pg_internal.hpp"
#include "sql.hpp"

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
  if (sqlstate.rfind("08", 0) == 0 || sqlstate.rfind("57P", 0) == 0
      || sqlstate == move_fence_sqlstate)
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
    return make_db_error(db_errc::unavailable,
                         std::string{"database connection lost: "} + e.what());
  } catch (const pqxx::in_doubt_error& e) {
    return make_db_error(db_errc::outcome_unknown,
                         std::string{"the connection was lost during COMMIT: "} + e.what());
  } catch (const pqxx::sql_error& e) {
    if (e.sqlstate() == move_fence_sqlstate) {
      // gost_move_fence's own words are the advice: without libpq's "ERROR:" and the
      // PL/pgSQL context lines.
      std::string text = e.what();
      if (auto at = text.find("CONTEXT:"); at != std::string::npos)
        text.erase(at);
      if (text.rfind("ERROR:", 0) == 0)
        text.erase(0, 6);
      auto first = text.find_first_not_of(" \t\n");
      auto last = text.find_last_not_of(" \t\n");
      return make_db_error(db_errc::unavailable, first == std::string::npos
                                                   ? text
                                                   : text.substr(first, last - first + 1));
    }
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

void pg_pool::observe(observer_fn fn) {
  impl_->observer = std::move(fn);
}

std::unique_ptr<pg_pool> dedicated_pool(pg_pool& pool, int size) {
  auto o = pool.opts();
  o.size = std::max(1, size);
  auto p = std::make_unique<pg_pool>(std::move(o));
  p->observe(pool.internals().observer);
  return p;
}

caf::error pg_pool::ping() {
  return with_connection(*this, [](pqxx::connection& c) {
    pqxx::nontransaction tx{c};
    tx.exec("SELECT 1");
  });
}

namespace {

/// A new connection with the pool's session settings (one round trip for all of them).
std::unique_ptr<pqxx::connection> open_connection(const pg_pool::options& o) {
  auto c = std::make_unique<pqxx::connection>(o.dsn);
  std::string set;
  if (!o.application_name.empty())
    set += "SET application_name = " + c->quote(o.application_name) + ";";
  if (o.idle_in_transaction_timeout.count() > 0)
    set += "SET idle_in_transaction_session_timeout = "
           + std::to_string(o.idle_in_transaction_timeout.count()) + ";";
  if (!set.empty()) {
    pqxx::nontransaction tx{*c};
    tx.exec(set);
  }
  return c;
}

} // namespace

caf::expected<int64_t> reap_by_age(pg_pool& pool, const char* table, const char* time_column,
                                   const std::vector<uint32_t>& shards, int64_t max_age_s) {
  int64_t n = 0;
  if (shards.empty())
    return n;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    pqxx::nontransaction tx{c};
    auto r =
      tx.exec_params(std::string{"DELETE FROM "} + table + " WHERE shard IN (" + number_list(shards)
                       + ") AND " + time_column + " < now() - make_interval(secs => $1)",
                     static_cast<double>(max_age_s));
    n = static_cast<int64_t>(r.affected_rows());
  });
  if (err)
    return err;
  return n;
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
      return make_db_error(db_errc::unavailable, "all " + std::to_string(p.slots.size())
                                                   + " database connections stayed busy for "
                                                   + std::to_string(p.opts.acquire_timeout.count())
                                                   + "ms; raise `pg.pool_size` or reduce load");
    p.slots[idx].busy = true;
  }
  auto& s = p.slots[idx];
  auto started = clock_type::now();
  auto release = [&] {
    s.last_used = clock_type::now();
    std::lock_guard<std::mutex> guard{p.mtx};
    s.busy = false;
    p.cv.notify_one();
  };
  caf::error result;
  bool fenced = false;
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
        s.conn = open_connection(pool.opts());
      fn(*s.conn);
      result = caf::error{};
      break;
    } catch (const pqxx::broken_connection&) {
      result = current_exception_to_error();
      s.conn.reset();
      continue; // reopen and try once more
    } catch (const pqxx::sql_error& e) {
      result = current_exception_to_error();
      // A move's fence refusing a write (gost_move_fence): the database answered.
      fenced = e.sqlstate() == move_fence_sqlstate;
      if (s.conn && !s.conn->is_open())
        s.conn.reset();
      break;
    } catch (...) {
      result = current_exception_to_error();
      if (s.conn && !s.conn->is_open())
        s.conn.reset();
      break;
    }
  }
  release();
  if (p.observer) {
    bool unreachable =
      !fenced && (result == db_errc::unavailable || result == db_errc::outcome_unknown);
    p.observer(unreachable ? result : caf::error{}, started);
  }
  return result;
}

std::string new_commit_mark() {
  return random_id();
}

std::string mark_statements(pqxx::transaction_base& tx, const std::string& mark) {
  std::string sql = "INSERT INTO commit_marks (id) VALUES (" + tx.quote(mark) + ");";
  // A mark is only looked at right after a lost COMMIT: keep a few minutes of them.
  thread_local uint32_t batches = 0;
  if (++batches % 256 == 0)
    sql += "DELETE FROM commit_marks WHERE at < now() - interval '10 minutes';";
  return sql;
}

void write_mark(pqxx::transaction_base& tx, const std::string& mark) {
  tx.exec(mark_statements(tx, mark));
}

caf::error commit_marked(pg_pool& pool, const std::string& mark,
                         const std::function<void(pqxx::connection&)>& fn) {
  bool in_doubt = false;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    for (int attempt = 1;; ++attempt) {
      try {
        fn(c);
        return;
      } catch (const pqxx::in_doubt_error&) {
        in_doubt = true;
        throw;
      } catch (const pqxx::sql_error& e) {
        // A deadlock or a serialization failure rolled the whole transaction back: nothing
        // was written, run it again (a few times) instead of failing every set of the batch.
        // So does a unique key another transaction took while this one decided (an offer's
        // seller key, write_behind.cpp): the next run reads it and refuses that set alone.
        bool again = e.sqlstate() == "40P01" || e.sqlstate() == "40001" || e.sqlstate() == "23505";
        if (!again || attempt >= 3)
          throw;
      }
    }
  });
  if (!err || !in_doubt)
    return err;
  // The outcome is the database's to tell: ask it on a new connection, while it comes back.
  auto deadline = clock_type::now() + pool.opts().acquire_timeout;
  auto wait = std::chrono::milliseconds{50};
  caf::error last;
  for (;;) {
    bool committed = false;
    last = with_connection(pool, [&](pqxx::connection& c) {
      pqxx::nontransaction tx{c};
      committed = !tx.exec("SELECT 1 FROM commit_marks WHERE id = " + tx.quote(mark)).empty();
    });
    if (!last)
      return committed ? caf::error{}
                       : make_db_error(db_errc::unavailable,
                                       "the connection to the database was lost before the commit "
                                       "completed; nothing was written");
    if (clock_type::now() + wait >= deadline)
      break;
    std::this_thread::sleep_for(wait);
    wait = std::min(wait * 2, std::chrono::milliseconds{1000});
  }
  return make_db_error(db_errc::outcome_unknown,
                       "the connection to the database was lost during COMMIT and whether it "
                       "committed could not be read back ("
                         + error_message(last)
                         + "); read the data to see, or retry with the same request_id");
}

} // namespace gost::persistence
