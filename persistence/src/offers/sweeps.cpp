#include "gost/persistence/offers/sweeps.hpp"

#include "pg_internal.hpp"

namespace gost::persistence {

caf::expected<sweep_progress> load_sweep(pg_pool& pool, const std::string& token, uint32_t shard) {
  sweep_progress out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out = {};
    pqxx::nontransaction tx{c};
    auto r = tx.exec_params(
      "SELECT after_id, enqueued, done FROM rescan_sweeps WHERE token = $1 AND shard = $2", token,
      static_cast<int64_t>(shard));
    if (r.empty())
      return;
    out.after_id = r[0][0].as<std::string>();
    out.enqueued = r[0][1].as<int64_t>();
    out.done = r[0][2].as<bool>();
  });
  if (err)
    return err;
  return out;
}

caf::error save_sweep(pg_pool& pool, const std::string& token, uint32_t shard,
                      const sweep_progress& p) {
  return with_connection(pool, [&](pqxx::connection& c) {
    pqxx::nontransaction tx{c};
    tx.exec_params("INSERT INTO rescan_sweeps (token, shard, after_id, enqueued, done)"
                   " VALUES ($1, $2, $3, $4, $5)"
                   " ON CONFLICT (token, shard) DO UPDATE SET after_id = EXCLUDED.after_id,"
                   " enqueued = EXCLUDED.enqueued, done = EXCLUDED.done, updated_at = now()",
                   token, static_cast<int64_t>(shard), p.after_id, p.enqueued, p.done);
  });
}

} // namespace gost::persistence
