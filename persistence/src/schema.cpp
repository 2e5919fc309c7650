#include "gost/persistence/schema.hpp"

#include <functional>
#include <map>

#include "pg_internal.hpp"

namespace gost::persistence {

namespace {

// Any fixed 64-bit number works; this one spells "gost-mig".
constexpr int64_t migration_lock_key = 0x676f73742d6d6967;

std::string checksum(const std::string& sql) {
  // FNV-1a 64 is enough to notice an edited migration; it is not a security check.
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : sql) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[17];
  snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

} // namespace

caf::expected<int> migrate(pg_pool& pool, const std::vector<migration>& ms) {
  int applied = 0;
  caf::error refusal;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    applied = 0;
    refusal = caf::error{};
    pqxx::work tx{c};
    // Serializes concurrent starts; released at commit or rollback.
    tx.exec_params("SELECT pg_advisory_xact_lock($1)", migration_lock_key);
    tx.exec("CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL, checksum text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())");
    std::map<int, std::string> done;
    for (auto row : tx.exec("SELECT version, checksum FROM schema_migrations"))
      done.emplace(row[0].as<int>(), row[1].as<std::string>());
    std::map<int, const migration*> known;
    for (auto& m : ms)
      known.emplace(m.version, &m);
    for (auto& [ver, sum] : done) {
      auto i = known.find(ver);
      if (i == known.end()) {
        refusal = make_db_error(db_errc::schema_mismatch,
                                "the database has schema migration " + std::to_string(ver)
                                  + " that this gost binary does not know; run a newer gostd");
        return;
      }
      if (checksum(i->second->sql) != sum) {
        refusal = make_db_error(db_errc::schema_mismatch,
                                "schema migration " + std::to_string(ver) + " (" + i->second->name
                                  + ") differs from the one applied to the database; "
                                    "migrations must never be edited once released");
        return;
      }
    }
    for (auto& [ver, m] : known) {
      if (done.count(ver) != 0)
        continue;
      tx.exec(m->sql);
      tx.exec_params("INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                     ver, m->name, checksum(m->sql));
      ++applied;
    }
    tx.commit();
  });
  if (err)
    return err;
  if (refusal)
    return refusal;
  return applied;
}

caf::expected<uint32_t> claim_installation(pg_pool& pool, uint32_t shard_count, bool* created) {
  int64_t stored = 0;
  bool inserted = false;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    pqxx::work tx{c};
    // The first node to start fixes shard_count; everyone later reads it.
    inserted = !tx.exec_params("INSERT INTO installation (shard_count) VALUES ($1)"
                               " ON CONFLICT DO NOTHING RETURNING shard_count",
                               static_cast<int64_t>(shard_count))
                  .empty();
    stored = tx.exec1("SELECT shard_count FROM installation")[0].as<int64_t>();
    tx.commit();
  });
  if (err)
    return err;
  if (created != nullptr)
    *created = inserted;
  return static_cast<uint32_t>(stored);
}

caf::error ensure_installation(pg_pool& pool, uint32_t shard_count) {
  auto stored = claim_installation(pool, shard_count);
  if (!stored)
    return stored.error();
  if (*stored != shard_count)
    return make_db_error(db_errc::schema_mismatch,
                         "this installation has shard.count=" + std::to_string(*stored)
                           + " but the node is configured with shard.count="
                           + std::to_string(shard_count) + "; set `shard.count` to "
                           + std::to_string(*stored)
                           + " (the shard count is fixed when an installation is created)");
  return caf::error{};
}

} // namespace gost::persistence
