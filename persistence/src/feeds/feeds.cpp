#include "gost/persistence/feeds/feeds.hpp"

#include <map>
#include <set>

#include "pg_internal.hpp"

namespace gost::persistence {

namespace {

std::string quoted_list(pqxx::transaction_base& tx, const std::vector<std::string>& xs) {
  std::string out;
  for (auto& x : xs)
    out += (out.empty() ? "" : ",") + tx.quote(x);
  return out;
}

keyed_offer keyed(const pqxx::row& row) {
  return {row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<int64_t>(),
          pqxx::binarystring{row[3]}.str()};
}

} // namespace

caf::expected<feed_task> begin_feed_task(pg_pool& pool, const std::string& task_id,
                                         const std::string& seller_id, const std::string& ns) {
  feed_task out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    pqxx::work tx{c};
    tx.exec_params("INSERT INTO feed_tasks (task_id, seller_id, namespace) VALUES ($1, $2, $3)"
                   " ON CONFLICT (task_id) DO NOTHING",
                   task_id, seller_id, ns);
    auto r = tx.exec_params1("SELECT finished_at IS NOT NULL, summary, seller_id, namespace"
                             " FROM feed_tasks WHERE task_id = $1",
                             task_id);
    out.finished = r[0].as<bool>();
    if (!r[1].is_null())
      out.summary = pqxx::binarystring{r[1]}.str();
    if (r[2].as<std::string>() != seller_id || r[3].as<std::string>() != ns)
      out.other_owner = r[2].as<std::string>() + "/" + r[3].as<std::string>();
    tx.commit();
  });
  if (err)
    return err;
  return out;
}

caf::expected<std::vector<feed_item>>
record_feed_items(pg_pool& pool, const std::string& task_id, const std::string& batch_id,
                  const std::vector<std::string>& external_ids) {
  auto r = record_feed_batch(pool, task_id, batch_id, external_ids, {});
  if (!r)
    return std::move(r.error());
  return std::move(r->items);
}

caf::expected<recorded_batch>
record_feed_batch(pg_pool& pool, const std::string& task_id, const std::string& batch_id,
                  const std::vector<std::string>& external_ids,
                  const std::function<feed_counts(const std::vector<feed_item>&)>& count) {
  recorded_batch out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.items.assign(external_ids.size(), feed_item::fresh);
    out.first_time = false;
    pqxx::work tx{c};
    out.first_time = !tx.exec_params("INSERT INTO feed_batches (task_id, batch_id) VALUES ($1, $2)"
                                     " ON CONFLICT DO NOTHING RETURNING 1",
                                     task_id, batch_id)
                        .empty();
    if (!external_ids.empty()) {
      // What earlier messages recorded.
      std::map<std::string, std::string> known; // external id -> batch
      for (auto row : tx.exec("SELECT external_id, batch_id FROM feed_items WHERE task_id = "
                              + tx.quote(task_id) + " AND external_id IN ("
                              + quoted_list(tx, external_ids) + ")"))
        known.emplace(row[0].as<std::string>(), row[1].as<std::string>());
      std::set<std::string> in_this; // ids earlier in this very message
      std::string values;
      for (size_t i = 0; i < external_ids.size(); ++i) {
        auto& id = external_ids[i];
        if (!in_this.insert(id).second) {
          out.items[i] = feed_item::duplicate;
          continue;
        }
        auto k = known.find(id);
        if (k == known.end()) {
          values +=
            (values.empty() ? "" : ",")
            + ("(" + tx.quote(task_id) + "," + tx.quote(id) + "," + tx.quote(batch_id) + ")");
          out.items[i] = feed_item::fresh;
        } else {
          out.items[i] = k->second == batch_id ? feed_item::again : feed_item::duplicate;
        }
      }
      if (!values.empty())
        tx.exec("INSERT INTO feed_items (task_id, external_id, batch_id) VALUES " + values
                + " ON CONFLICT DO NOTHING");
    }
    if (out.first_time && count) {
      auto n = count(out.items);
      tx.exec_params("UPDATE feed_tasks SET added = added + $2, updated = updated + $3,"
                     " unchanged = unchanged + $4, rejected = rejected + $5,"
                     " duplicates = duplicates + $6 WHERE task_id = $1",
                     task_id, n.added, n.updated, n.unchanged, n.rejected, n.duplicates);
    }
    tx.commit();
  });
  if (err)
    return err;
  return out;
}

caf::expected<std::vector<keyed_offer>>
find_by_external_ids(pg_pool& pool, const std::string& seller_id, const std::string& ns,
                     const std::vector<std::string>& external_ids) {
  std::vector<keyed_offer> out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.clear();
    if (external_ids.empty())
      return;
    pqxx::nontransaction tx{c};
    for (auto row : tx.exec("SELECT offer_id, external_id, version, body FROM offers"
                            " WHERE seller_id = "
                            + tx.quote(seller_id) + " AND namespace = " + tx.quote(ns)
                            + " AND external_id IN (" + quoted_list(tx, external_ids) + ")"))
      out.push_back(keyed(row));
  });
  if (err)
    return err;
  return out;
}

caf::expected<std::vector<keyed_offer>> offers_missing_from(pg_pool& pool,
                                                            const std::string& task_id,
                                                            const std::string& seller_id,
                                                            const std::string& ns) {
  std::vector<keyed_offer> out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.clear();
    pqxx::nontransaction tx{c};
    for (auto row :
         tx.exec_params("SELECT o.offer_id, o.external_id, o.version, o.body FROM offers o"
                        " WHERE o.seller_id = $1 AND o.namespace = $2 AND o.external_id IS NOT NULL"
                        " AND NOT EXISTS (SELECT 1 FROM feed_items i WHERE i.task_id = $3"
                        "                 AND i.external_id = o.external_id)"
                        " ORDER BY o.offer_id",
                        seller_id, ns, task_id))
      out.push_back(keyed(row));
  });
  if (err)
    return err;
  return out;
}

caf::error finish_feed_task(pg_pool& pool, const std::string& task_id, const std::string& summary) {
  return with_connection(pool, [&](pqxx::connection& c) {
    pqxx::work tx{c};
    tx.exec_params("UPDATE feed_tasks SET finished_at = now(), summary = $2 WHERE task_id = $1",
                   task_id, pqxx::binarystring{summary});
    tx.exec_params("DELETE FROM feed_items WHERE task_id = $1", task_id);
    tx.exec_params("DELETE FROM feed_batches WHERE task_id = $1", task_id);
    tx.commit();
  });
}

caf::error add_feed_counts(pg_pool& pool, const std::string& task_id, const feed_counts& n) {
  return with_connection(pool, [&](pqxx::connection& c) {
    pqxx::nontransaction tx{c};
    tx.exec_params("UPDATE feed_tasks SET added = added + $2, updated = updated + $3,"
                   " unchanged = unchanged + $4, rejected = rejected + $5,"
                   " duplicates = duplicates + $6 WHERE task_id = $1",
                   task_id, n.added, n.updated, n.unchanged, n.rejected, n.duplicates);
  });
}

caf::expected<std::pair<feed_counts, int32_t>> feed_progress(pg_pool& pool,
                                                             const std::string& task_id) {
  std::pair<feed_counts, int32_t> out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    pqxx::nontransaction tx{c};
    auto r = tx.exec_params1("SELECT added, updated, unchanged, rejected, duplicates,"
                             " (SELECT count(DISTINCT batch_id) FROM feed_items WHERE task_id = $1)"
                             " FROM feed_tasks WHERE task_id = $1",
                             task_id);
    out.first = {r[0].as<int64_t>(), r[1].as<int64_t>(), r[2].as<int64_t>(), r[3].as<int64_t>(),
                 r[4].as<int64_t>()};
    out.second = r[5].as<int32_t>();
  });
  if (err)
    return err;
  return out;
}

} // namespace gost::persistence
