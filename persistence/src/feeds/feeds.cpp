#include "gost/persistence/feeds/feeds.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "gost/persistence/cluster/placement.hpp"
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

/// The databases holding `shards` now, each once, the home database (`home`) left out.
std::vector<pg_pool*> spread_databases(const shard_placement& where,
                                       const std::vector<uint32_t>& shards, const pg_pool& home) {
  std::vector<pg_pool*> out;
  for (auto shard : shards) {
    auto* db = where.database(where.group_of(shard));
    if (db != nullptr && db != &home && std::find(out.begin(), out.end(), db) == out.end())
      out.push_back(db);
  }
  return out;
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
                     const std::vector<std::string>& external_ids, const shard_placement* where) {
  std::vector<keyed_offer> out;
  std::vector<std::string> claimed; // offer ids claimed here for offers in other groups
  std::vector<uint32_t> spread;     // shards holding offers of the seller outside its home group
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.clear();
    claimed.clear();
    spread.clear();
    if (external_ids.empty())
      return;
    pqxx::nontransaction tx{c};
    auto keys = " WHERE seller_id = " + tx.quote(seller_id) + " AND namespace = " + tx.quote(ns)
                + " AND external_id IN (" + quoted_list(tx, external_ids) + ")";
    auto sql = "SELECT offer_id, external_id, version, body, NULL::int FROM offers" + keys;
    if (where != nullptr)
      sql += " UNION ALL SELECT offer_id, NULL, NULL, NULL, NULL FROM offer_keys" + keys
             + " UNION ALL SELECT NULL, NULL, NULL, NULL, stray_shard FROM seller_spread"
               " WHERE seller_id = "
             + tx.quote(seller_id);
    for (auto row : tx.exec(sql)) {
      if (!row[4].is_null())
        spread.push_back(row[4].as<uint32_t>());
      else if (row[1].is_null())
        claimed.push_back(row[0].as<std::string>());
      else
        out.push_back(keyed(row));
    }
  });
  if (err)
    return err;
  if (where == nullptr || claimed.empty())
    return out;
  std::set<std::string> seen;
  for (auto& o : out)
    seen.insert(o.offer_id);
  // The claimed offers, in the databases now holding the shards the seller's offers were
  // spread to; still under the key.
  for (auto* db : spread_databases(*where, spread, pool)) {
    err = with_connection(*db, [&](pqxx::connection& c) {
      pqxx::nontransaction tx{c};
      for (auto row : tx.exec("SELECT offer_id, external_id, version, body FROM offers"
                              " WHERE offer_id IN ("
                              + quoted_list(tx, claimed) + ") AND seller_id = "
                              + tx.quote(seller_id) + " AND namespace = " + tx.quote(ns)
                              + " AND external_id IN (" + quoted_list(tx, external_ids) + ")"))
        if (seen.insert(row[0].as<std::string>()).second)
          out.push_back(keyed(row));
    });
    if (err)
      return err;
  }
  return out;
}

caf::expected<std::vector<keyed_offer>>
offers_missing_from(pg_pool& pool, const std::string& task_id, const std::string& seller_id,
                    const std::string& ns, const shard_placement* where) {
  std::vector<keyed_offer> out;
  std::vector<uint32_t> spread;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.clear();
    spread.clear();
    pqxx::nontransaction tx{c};
    std::string sql = "SELECT o.offer_id, o.external_id, o.version, o.body, NULL::int FROM offers o"
                      " WHERE o.seller_id = $1 AND o.namespace = $2 AND o.external_id IS NOT NULL"
                      " AND NOT EXISTS (SELECT 1 FROM feed_items i WHERE i.task_id = $3"
                      "                 AND i.external_id = o.external_id)";
    if (where != nullptr)
      sql += " UNION ALL SELECT NULL, NULL, NULL, NULL, stray_shard FROM seller_spread"
             " WHERE seller_id = $1";
    for (auto row : tx.exec_params(sql, seller_id, ns, task_id)) {
      if (row[4].is_null())
        out.push_back(keyed(row));
      else
        spread.push_back(row[4].as<uint32_t>());
    }
  });
  if (err)
    return err;
  if (where == nullptr || spread.empty())
    return out;
  std::set<std::string> seen; // an offer in two databases (a move copying) counts once
  for (auto& o : out)
    seen.insert(o.offer_id);
  // The seller's offers in its spread groups, less those whose external id the task carried
  // (its items are at home), a chunk at a time.
  for (auto* db : spread_databases(*where, spread, pool)) {
    std::vector<keyed_offer> there;
    err = with_connection(*db, [&](pqxx::connection& c) {
      there.clear();
      pqxx::nontransaction tx{c};
      for (auto row : tx.exec_params("SELECT offer_id, external_id, version, body FROM offers"
                                     " WHERE seller_id = $1 AND namespace = $2"
                                     " AND external_id IS NOT NULL",
                                     seller_id, ns))
        there.push_back(keyed(row));
    });
    if (err)
      return err;
    constexpr size_t chunk = 1000;
    for (size_t at = 0; at < there.size(); at += chunk) {
      auto end = std::min(there.size(), at + chunk);
      std::set<std::string> carried;
      err = with_connection(pool, [&](pqxx::connection& c) {
        carried.clear();
        pqxx::nontransaction tx{c};
        std::vector<std::string> ids;
        for (size_t i = at; i < end; ++i)
          ids.push_back(there[i].external_id);
        for (auto row :
             tx.exec("SELECT external_id FROM feed_items WHERE task_id = " + tx.quote(task_id)
                     + " AND external_id IN (" + quoted_list(tx, ids) + ")"))
          carried.insert(row[0].as<std::string>());
      });
      if (err)
        return err;
      for (size_t i = at; i < end; ++i)
        if (carried.count(there[i].external_id) == 0 && seen.insert(there[i].offer_id).second)
          out.push_back(std::move(there[i]));
    }
  }
  std::sort(out.begin(), out.end(),
            [](const keyed_offer& a, const keyed_offer& b) { return a.offer_id < b.offer_id; });
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
