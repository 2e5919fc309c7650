#pragma once
// Test support: a fresh database with gost's schema and a pool on it (tests that link
// gost_persistence).

#include <doctest/doctest.h>

#include "gost/persistence/pg_pool.hpp"
#include "gost/persistence/schema.hpp"
#include "gost/testing/pg.hpp"

namespace gost::testing {

inline persistence::pg_pool::options pool_options(const temp_db& db, int size = 2) {
  persistence::pg_pool::options o;
  o.dsn = db.dsn();
  o.size = size;
  return o;
}

/// A temporary database, migrated, with a pool of `size` connections (two by default).
struct migrated_db {
  temp_db db;
  persistence::pg_pool pool;
  explicit migrated_db(int size = 2) : pool{pool_options(db, size)} {
    REQUIRE(persistence::migrate(pool));
  }
};

} // namespace gost::testing
