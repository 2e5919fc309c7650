#pragma once
// The catalog's versions (migration 0021, docs/catalog-evolution.md): each stored version is
// the migration file that leads to it, kept verbatim, so every node moves offers by the same
// rules whatever files it was started with.

#include <cstdint>
#include <string>
#include <vector>

#include "gost/persistence/errors.hpp"

namespace gost::persistence {

class pg_pool;

/// One stored catalog version: the migration from `version - 1`.
struct catalog_version_row {
  int32_t version = 0;
  std::string source; ///< the file it was loaded from (for the operator)
  std::string rules;  ///< the migration file, verbatim
  int64_t loaded_us = 0;
};

/// Stores the versions not stored yet (one transaction) and returns every stored version in
/// order. A version already stored with other rules is refused (db_errc::conflict, naming the
/// version and both sources): a version never changes once loaded; write the next one.
caf::expected<std::vector<catalog_version_row>>
store_catalog_versions(pg_pool& pool, const std::vector<catalog_version_row>& versions);

} // namespace gost::persistence
