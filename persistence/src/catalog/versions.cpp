#include "gost/persistence/catalog/versions.hpp"

#include "pg_internal.hpp"

namespace gost::persistence {

caf::expected<std::vector<catalog_version_row>>
store_catalog_versions(pg_pool& pool, const std::vector<catalog_version_row>& versions) {
  std::vector<catalog_version_row> out;
  caf::error refused;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.clear();
    refused = caf::error{};
    pqxx::work tx{c};
    // Nodes starting at once with the same files: one stores, the others compare.
    tx.exec("SELECT pg_advisory_xact_lock(hashtext('gost.catalog_versions'))");
    for (auto& v : versions) {
      auto stored =
        tx.exec_params("SELECT source, rules FROM catalog_versions WHERE version = $1", v.version);
      if (!stored.empty()) {
        if (stored[0][1].as<std::string>() != v.rules) {
          refused = make_db_error(db_errc::conflict,
                                  "catalog version " + std::to_string(v.version)
                                    + " is stored with other rules (loaded from `"
                                    + stored[0][0].as<std::string>() + "`) than `" + v.source
                                    + "` holds: a stored version never changes; write the next "
                                      "version instead");
          return; // nothing committed
        }
        continue;
      }
      tx.exec_params("INSERT INTO catalog_versions (version, from_version, source, rules)"
                     " VALUES ($1, $2, $3, $4)",
                     v.version, v.version - 1, v.source, v.rules);
    }
    for (auto row : tx.exec("SELECT version, source, rules,"
                            " (extract(epoch FROM loaded_at) * 1000000)::bigint"
                            " FROM catalog_versions ORDER BY version")) {
      catalog_version_row r;
      r.version = row[0].as<int32_t>();
      r.source = row[1].as<std::string>();
      r.rules = row[2].as<std::string>();
      r.loaded_us = row[3].as<int64_t>();
      out.push_back(std::move(r));
    }
    tx.commit();
  });
  if (err)
    return err;
  if (refused)
    return refused;
  return out;
}

} // namespace gost::persistence
