#pragma once
// Test support: a fresh database per test on the real PostgreSQL server started by
// scripts/pg.sh (see scripts/test.sh). Set GOST_TEST_PG to point elsewhere.

#include <string>

namespace gost::testing {

/// Connection parameters of the test server, without a database name.
std::string test_server();

/// Creates a uniquely named database on construction and drops it on destruction.
class temp_db {
public:
  temp_db();
  ~temp_db();
  temp_db(const temp_db&) = delete;
  temp_db& operator=(const temp_db&) = delete;

  const std::string& name() const { return name_; }
  /// libpq DSN of this database.
  std::string dsn() const;
  /// Runs SQL and returns the first column of the first row ("" when no row).
  std::string scalar(const std::string& sql) const;

private:
  std::string name_;
};

} // namespace gost::testing
