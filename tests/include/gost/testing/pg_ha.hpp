#pragma once
// Test support: a PostgreSQL primary with a synchronous standby and automatic failover
// (scripts/pg-ha.sh: pg_auto_failover's monitor and two nodes) of the test's own, in a data
// directory under /tmp on free ports; for the failover test (e2e/failover.e2etest.cpp).

#include <string>

namespace gost::testing {

class private_ha_set {
public:
  /// `script`: the checkout's scripts/pg-ha.sh. Creates and starts the set; returns once one
  /// node is primary and the other its synchronous standby. Failures throw std::runtime_error
  /// with the script's output.
  explicit private_ha_set(std::string script);
  /// Stops the set and deletes it.
  ~private_ha_set();
  private_ha_set(const private_ha_set&) = delete;
  private_ha_set& operator=(const private_ha_set&) = delete;

  /// Starts what is not running (a killed node rejoins as the standby); returns once a
  /// primary has its synchronous standby again.
  void start();
  /// kill -9 of the primary's node (its keeper and postmaster); returns the node's port.
  int kill_primary();
  /// The multi-host DSN of the `gost` database (`target_session_attrs=read-write`).
  const std::string& dsn() const { return dsn_; }
  /// The monitor's view of the set (pg_autoctl show state and settings), for messages.
  std::string state() const;

private:
  std::string run(const std::string& args) const;

  std::string script_;
  std::string root_;
  int monitor_port_ = 0;
  int ports_[2] = {0, 0}; ///< nodes a and b
  std::string dsn_;
};

} // namespace gost::testing
