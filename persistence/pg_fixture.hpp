#pragma once
// Test support for persistence/: a fresh database with gost's schema and a pool on it.

#include <doctest/doctest.h>

#include "gost/persistence/pg_pool.hpp"
#include "gost/persistence/schema.hpp"
#include "gost/testing/pg.hpp"

namespace gost::persistence {

inline pg_pool::options pool_options(const testing::temp_db& db, int size = 2) {
  pg_pool::options o;
  o.dsn = db.dsn();
  o.size = size;
  return o;
}

/// A temporary database, migrated, with a pool of two connections.
struct migrated_db {
  testing::temp_db db;
  pg_pool pool{pool_options(db)};
  migrated_db() { REQUIRE(migrate(pool)); }
};

} // namespace gost::persistence
