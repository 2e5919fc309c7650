#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "gost/persistence/errors.hpp"

namespace gost::persistence {

/// A fixed-size pool of PostgreSQL connections. Connections are opened lazily, checked with a
/// cheap query when they sat idle for a while, and reopened after the server dropped them.
/// Callers block while every connection is busy (bounded by `acquire_timeout`): the pool size
/// is the back-pressure on the database.
///
/// Thread-safe. libpqxx stays behind this type: code outside persistence/ never sees it.
class pg_pool {
public:
  struct options {
    std::string dsn;
    int size = 4;
    std::chrono::milliseconds acquire_timeout{10'000};
    std::chrono::milliseconds idle_check_after{30'000};
    /// Set on each connection: how its sessions show in pg_stat_activity (a node's are
    /// `gost/<node id>`: persistence/cluster/leases.hpp application_name). Empty: libpq's.
    std::string application_name;
    /// Set on each connection: PostgreSQL ends a session that sits idle inside a transaction
    /// this long (a process frozen half-way through a commit), releasing its locks. A node
    /// keeps it below its lease timeout. 0: the server's setting.
    std::chrono::milliseconds idle_in_transaction_timeout{0};
  };

  explicit pg_pool(options opts);
  ~pg_pool();
  pg_pool(const pg_pool&) = delete;
  pg_pool& operator=(const pg_pool&) = delete;

  /// Opens one connection and runs `SELECT 1`, retrying until `timeout`; the error says what
  /// to change (the DSN, or starting the server).
  caf::error wait_ready(std::chrono::milliseconds timeout);

  /// Runs `SELECT 1` on a pooled connection.
  caf::error ping();

  /// Told after every call that had a connection whether the server could be reached:
  /// `unreachable` is empty when it answered (whatever it answered, an SQL error too), else
  /// why it could not be reached (db_errc::unavailable or outcome_unknown); `started` is when
  /// the call got its connection. A call that found every connection busy tells nothing.
  using observer_fn = std::function<void(const caf::error& unreachable,
                                         std::chrono::steady_clock::time_point started)>;

  /// Sets the observer (the node's PostgreSQL tracker, gost/core/dependency.hpp). Call it
  /// before the pool is shared with other threads; it runs on the caller's thread of each
  /// call, after the connection went back to the pool.
  void observe(observer_fn fn);

  const options& opts() const noexcept { return opts_; }

  /// Opaque to users; persistence/src defines it.
  struct impl;
  impl& internals() { return *impl_; }

private:
  options opts_;
  std::unique_ptr<impl> impl_;
};

} // namespace gost::persistence
