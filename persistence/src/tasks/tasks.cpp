#include "gost/persistence/tasks/tasks.hpp"

#include "pg_internal.hpp"

namespace gost::persistence {

namespace {

task_group group_of(const pqxx::row& row) {
  return {row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<std::string>(),
          row[3].as<int64_t>(), row[4].as<int32_t>()};
}

} // namespace

caf::expected<task_group> create_task_group(pg_pool& pool, const task_group& g) {
  task_group out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    pqxx::work tx{c};
    // The insert, or (a group of that id being there) the row that is.
    auto r = tx.exec_params(
      "WITH ins AS (INSERT INTO task_groups (group_id, task_type, source, retry_delay_ms,"
      " max_attempts) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING"
      " RETURNING group_id, task_type, source, retry_delay_ms, max_attempts)"
      " SELECT * FROM ins UNION ALL SELECT group_id, task_type, source, retry_delay_ms,"
      " max_attempts FROM task_groups WHERE group_id = $1 AND NOT EXISTS (SELECT 1 FROM ins)",
      g.group_id, g.task_type, g.source, g.retry_delay_ms, g.max_attempts);
    tx.commit();
    out = group_of(r.at(0));
  });
  if (err)
    return err;
  return out;
}

caf::expected<std::optional<task_group>> find_task_group(pg_pool& pool,
                                                         const std::string& group_id) {
  std::optional<task_group> out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.reset();
    pqxx::nontransaction tx{c};
    auto r = tx.exec_params("SELECT group_id, task_type, source, retry_delay_ms, max_attempts"
                            " FROM task_groups WHERE group_id = $1",
                            group_id);
    if (!r.empty())
      out = group_of(r[0]);
  });
  if (err)
    return err;
  return out;
}

caf::expected<std::vector<tagged_entity>>
list_tagged_entities(pg_pool& pool, const std::string& kind, const std::string& lane,
                     const std::string& tag, const std::string& after_id, size_t limit) {
  std::vector<tagged_entity> out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.clear();
    pqxx::nontransaction tx{c};
    // Two statements, so that each has its index (0029): any tag, or one.
    auto sql = std::string{"SELECT entity_id, tag FROM entities WHERE kind = $1 AND lane = $2"
                           " AND tag IS NOT NULL AND "}
               + (tag.empty() ? "$3 = ''" : "tag = $3")
               + " AND entity_id COLLATE \"C\" > $4 ORDER BY entity_id COLLATE \"C\" LIMIT $5";
    for (auto row : tx.exec_params(sql, kind, lane, tag, after_id, static_cast<int64_t>(limit)))
      out.push_back({row[0].as<std::string>(), row[1].as<std::string>()});
  });
  if (err)
    return err;
  return out;
}

} // namespace gost::persistence
