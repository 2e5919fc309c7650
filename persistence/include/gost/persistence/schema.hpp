#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gost/persistence/errors.hpp"

namespace gost::persistence {

class pg_pool;

/// One versioned migration, from persistence/migrations/NNNN_name.sql.
struct migration {
  int version;
  std::string name;
  std::string sql;
};

/// The migrations compiled into this binary, in version order.
const std::vector<migration>& builtin_migrations();

/// Applies the missing migrations, all in one transaction under an advisory lock, so nodes
/// starting at the same time never race; records each in `schema_migrations`. Refuses to run
/// when the database holds a migration this binary does not know (a newer gost ran on it) or
/// a known one with different text. Returns how many were applied.
caf::expected<int> migrate(pg_pool& pool, const std::vector<migration>& ms = builtin_migrations());

/// Reads or, on the first start of an installation, stores `shard_count`. A node configured
/// with another value gets `db_errc::schema_mismatch` and a message naming the key.
caf::error ensure_installation(pg_pool& pool, uint32_t shard_count);

/// The database's `installation` row's shard count; when it has none yet, it is stored as
/// `shard_count` (`created` is then set, when given). ensure_installation's first step.
caf::expected<uint32_t> claim_installation(pg_pool& pool, uint32_t shard_count,
                                           bool* created = nullptr);

} // namespace gost::persistence
