#include "gost/persistence/cluster/pauses.hpp"

#include "gost/persistence/cluster/leases.hpp"
#include "pg_internal.hpp"

namespace gost::persistence {

caf::expected<std::vector<stage_pause>> list_stage_pauses(pg_pool& pool) {
  std::vector<stage_pause> out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.clear();
    pqxx::nontransaction tx{c};
    for (auto row : tx.exec("SELECT stage_id, paused_by,"
                            " (extract(epoch FROM paused_at) * 1000000)::bigint"
                            " FROM stage_pauses ORDER BY stage_id"))
      out.push_back({row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<int64_t>()});
  });
  if (err)
    return err;
  return out;
}

namespace {

/// Runs `statement` (one parameter or two) and notifies the cluster in the same transaction;
/// true when it changed a row.
template <class... Params>
caf::expected<bool> change_and_notify(pg_pool& pool, const char* statement, const Params&... ps) {
  bool changed = false;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    pqxx::work tx{c};
    changed = tx.exec_params(statement, ps...).affected_rows() > 0;
    if (changed)
      tx.exec(std::string{"NOTIFY "} + cluster_channel);
    tx.commit();
  });
  if (err)
    return err;
  return changed;
}

} // namespace

caf::expected<bool> pause_stage(pg_pool& pool, const std::string& stage_id,
                                const std::string& who) {
  return change_and_notify(pool,
                           "INSERT INTO stage_pauses (stage_id, paused_by) VALUES ($1, $2)"
                           " ON CONFLICT (stage_id) DO NOTHING",
                           stage_id, who);
}

caf::expected<bool> resume_stage(pg_pool& pool, const std::string& stage_id) {
  return change_and_notify(pool, "DELETE FROM stage_pauses WHERE stage_id = $1", stage_id);
}

} // namespace gost::persistence
