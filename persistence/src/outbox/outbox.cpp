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

caf::expected<bool> park_outbox(pg_pool& pool, const parked_outbox_row& p) {
  bool moved = false;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    pqxx::work tx{c};
    auto r = tx.exec_params(
      "WITH gone AS (DELETE FROM outbox_batches WHERE id = $1"
      " RETURNING id, shard, events, payload, created_at)"
      " INSERT INTO outbox_parked (id, shard, events, payload, created_at, topic, msg_key, bytes,"
      " reason, error) SELECT id, shard, events, payload, created_at, $2, $3, $4, $5, $6 FROM gone",
      p.id, p.topic, p.key, p.bytes, p.reason, p.error);
    moved = r.affected_rows() == 1;
    tx.commit();
  });
  if (err)
    return err;
  return moved;
}

caf::expected<std::vector<parked_outbox_row>> list_parked_outbox(pg_pool& pool, int64_t after_id,
                                                                 size_t limit) {
  std::vector<parked_outbox_row> out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.clear();
    pqxx::nontransaction tx{c};
    for (auto row :
         tx.exec_params("SELECT id, shard, events, topic, msg_key, bytes, reason, error,"
                        " (extract(epoch FROM parked_at) * 1000000)::bigint FROM outbox_parked"
                        " WHERE id > $1 ORDER BY id LIMIT $2",
                        after_id, static_cast<int64_t>(limit))) {
      parked_outbox_row r;
      r.id = row[0].as<int64_t>();
      r.shard = row[1].as<uint32_t>();
      r.events = row[2].as<int32_t>();
      r.topic = row[3].as<std::string>();
      r.key = row[4].as<std::string>();
      r.bytes = row[5].as<int64_t>();
      r.reason = row[6].as<std::string>();
      r.error = row[7].as<std::string>();
      r.parked_us = row[8].as<int64_t>();
      out.push_back(std::move(r));
    }
  });
  if (err)
    return err;
  return out;
}

caf::expected<uint64_t> retry_parked_outbox(pg_pool& pool, const std::vector<int64_t>& ids) {
  if (ids.empty())
    return uint64_t{0};
  auto list = number_list(ids);
  uint64_t n = 0;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    pqxx::work tx{c};
    auto r = tx.exec("WITH back AS (DELETE FROM outbox_parked WHERE id IN (" + list
                     + ") RETURNING id, shard, events, payload, created_at)"
                       " INSERT INTO outbox_batches (id, shard, events, payload, created_at)"
                       " SELECT id, shard, events, payload, created_at FROM back");
    n = static_cast<uint64_t>(r.affected_rows());
    tx.commit();
  });
  if (err)
    return err;
  return n;
}

caf::expected<uint64_t> drop_parked_outbox(pg_pool& pool, const std::vector<int64_t>& ids) {
  if (ids.empty())
    return uint64_t{0};
  auto list = number_list(ids);
  uint64_t n = 0;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    pqxx::nontransaction tx{c};
    n = static_cast<uint64_t>(
      tx.exec("DELETE FROM outbox_parked WHERE id IN (" + list + ")").affected_rows());
  });
  if (err)
    return err;
  return n;
}

} // namespace gost::persistence
