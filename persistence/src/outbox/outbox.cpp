#include "gost/persistence/outbox/outbox.hpp"

#include "pg_internal.hpp"
#include "sql.hpp"

namespace gost::persistence {

caf::expected<std::vector<outbox_row>>
read_outbox(pg_pool& pool, const std::vector<uint32_t>& shards, size_t limit) {
  std::vector<outbox_row> out;
  if (shards.empty())
    return out;
  auto list = number_list(shards);
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.clear();
    pqxx::nontransaction tx{c};
    for (auto row : tx.exec_params("SELECT id, shard, events, payload FROM outbox_batches"
                                   " WHERE shard IN ("
                                     + list + ") ORDER BY id LIMIT $1",
                                   static_cast<int64_t>(limit))) {
      outbox_row r;
      r.id = row[0].as<int64_t>();
      r.shard = row[1].as<uint32_t>();
      r.events = row[2].as<int32_t>();
      r.payload = pqxx::binarystring{row[3]}.str();
      out.push_back(std::move(r));
    }
  });
  if (err)
    return err;
  return out;
}

caf::error delete_outbox(pg_pool& pool, const std::vector<int64_t>& ids) {
  if (ids.empty())
    return {};
  auto list = number_list(ids);
  return with_connection(pool, [&](pqxx::connection& c) {
    pqxx::nontransaction tx{c};
    tx.exec("DELETE FROM outbox_batches WHERE id IN (" + list + ")");
  });
}

} // namespace gost::persistence
