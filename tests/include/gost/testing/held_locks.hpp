#pragma once
// Test support: locks held in PostgreSQL by a session of the test's own (psql), for as long as
// the test says, so that the code under test waits on them (a commit on a row lock, a pool's
// connection on a table lock).

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "gost/testing/pg.hpp"
#include "gost/testing/process.hpp"

namespace gost::testing {

/// Runs `lock_sql` (`SELECT … FOR UPDATE`, `LOCK TABLE …`) in a transaction of a psql session
/// of its own and keeps the locks for `hold`; `flag` is a scratch file the server writes once
/// they are taken. Returns once they are; the session ends when `hold` has passed (the child
/// process: wait for it, or let it go).
inline std::unique_ptr<child_process> hold_locks(const temp_db& db, const std::string& lock_sql,
                                                 std::chrono::milliseconds hold,
                                                 const std::string& flag) {
  std::remove(flag.c_str());
  auto sql = "BEGIN; " + lock_sql + "; COPY (SELECT 1) TO '" + flag + "'; SELECT pg_sleep("
             + std::to_string(hold.count() / 1000.0) + "); COMMIT;";
  auto p = std::make_unique<child_process>("/usr/bin/psql",
                                           std::vector<std::string>{db.dsn(), "-qXc", sql});
  REQUIRE_MESSAGE(eventually(std::chrono::seconds{10},
                             [&] { return std::ifstream{flag}.good() || !p->running(); }),
                  p->output());
  return p;
}

} // namespace gost::testing
