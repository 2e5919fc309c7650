#pragma once
// Test support for persistence/: a fresh database with gost's schema and a pool on it
// (gost/testing/migrated_db.hpp, shared with the other libraries' tests).

#include "gost/testing/migrated_db.hpp"

namespace gost::persistence {

using testing::migrated_db;
using testing::pool_options;

} // namespace gost::persistence
