#include "gost/persistence/images/images.hpp"

#include <algorithm>
#include <map>

#include "pg_internal.hpp"
#include "sql.hpp"

namespace gost::persistence {

namespace {

std::string ms_interval(int64_t ms) {
  return "(" + std::to_string(ms) + " * interval '1 millisecond')";
}

std::string task_pk(pqxx::transaction_base& tx, const image_task& t) {
  return tx.quote(t.function) + "," + std::to_string(t.partition) + "," + tx.quote(t.args);
}

/// A timestamp expression as µs since the epoch.
std::string epoch_us(const std::string& ts) {
  return "(extract(epoch FROM " + ts + ") * 1000000)::bigint";
}

/// The statement writing a pending status, stamped `updated_at`, for each key of `reqs`
/// without a live result (an expired one is replaced; a live one, even a final one asked to
/// be computed again, stays until the new result).
std::string upsert_pending(pqxx::transaction_base& tx, const std::vector<image_request>& reqs,
                           const std::string& updated_at) {
  values_list pending;
  std::map<std::string, const image_request*> by_key; // one pending row per key
  for (auto& r : reqs)
    by_key[r.key] = &r;
  for (auto& [key, r] : by_key)
    pending.row(tx.quote(key) + "," + tx.quote(r->task.function) + "," + tx.quote(r->task.args)
                + ", 'pending', clock_timestamp() + " + ms_interval(r->pending_ttl_ms) + ","
                + updated_at);
  return "INSERT INTO image_results (result_key, function, args, status, expires_at, updated_at)"
         " VALUES "
         + pending.str()
         + " ON CONFLICT (result_key) DO UPDATE SET status = 'pending', value = NULL,"
           " error_kind = NULL, error = NULL, attempts = 0, expires_at = EXCLUDED.expires_at,"
           " updated_at = EXCLUDED.updated_at WHERE image_results.expires_at <= clock_timestamp()"
           " RETURNING 1";
}

} // namespace

caf::expected<std::vector<image_result>> find_image_results(pg_pool& pool,
                                                            const std::vector<std::string>& keys) {
  std::vector<image_result> out;
  if (keys.empty())
    return out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.clear();
    pqxx::nontransaction tx{c};
    auto r = tx.exec("SELECT result_key, function, args, status, value, coalesce(error_kind, ''),"
                     " coalesce(error, ''), attempts,"
                     " (extract(epoch FROM expires_at) * 1000000)::bigint, "
                     + epoch_us("updated_at") + " FROM image_results WHERE result_key IN ("
                     + quoted_list(tx, keys) + ") AND expires_at > clock_timestamp()");
    for (auto row : r) {
      image_result x;
      x.key = row[0].as<std::string>();
      x.function = row[1].as<std::string>();
      x.args = row[2].as<std::string>();
      x.status = row[3].as<std::string>();
      if (!row[4].is_null())
        x.value = pqxx::binarystring{row[4]}.str();
      x.error_kind = row[5].as<std::string>();
      x.error = row[6].as<std::string>();
      x.attempts = row[7].as<int32_t>();
      x.expires_at_us = row[8].as<int64_t>();
      x.updated_at_us = row[9].as<int64_t>();
      out.push_back(std::move(x));
    }
  });
  if (err)
    return err;
  return out;
}

caf::expected<size_t> enqueue_image_tasks(pg_pool& pool, const std::vector<image_request>& reqs) {
  size_t added = 0;
  if (reqs.empty())
    return added;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    pqxx::work tx{c};
    // The pending statuses first: their ON CONFLICT locks each key's result row (a live one
    // too, left unchanged), and the feeder stores a result through that row (in the
    // transaction deleting its task), so until this transaction ends no result of these keys
    // is stored, and any stored before is seen by the next statement (read committed: a new
    // snapshot). A miss whose result was stored since the asker looked (it read nothing, a
    // feeder took and finished the task another asker queued meanwhile) queues nothing: the
    // task row it would have merged with is gone, and inserting it again would compute the
    // same image twice (issue 27). Rows are locked in key order here and in
    // finish_image_tasks, results before tasks in both, so the two never deadlock.
    tx.exec(upsert_pending(tx, reqs, "clock_timestamp()"));
    values_list tasks;
    for (auto& r : reqs)
      tasks.row(tx.quote(r.key) + "," + tx.quote(r.task.function) + ","
                + std::to_string(r.task.partition) + "::integer," + tx.quote(r.task.args) + ","
                + std::to_string(r.task.ttl_ms) + "::bigint," + (r.recompute ? "true" : "false"));
    auto res = tx.exec(
      "INSERT INTO image_tasks (function, partition, args, ttl_ms) SELECT q.function,"
      " q.partition, q.args, q.ttl_ms FROM (VALUES "
      + tasks.str()
      + ") q (result_key, function, partition, args, ttl_ms, recompute) WHERE q.recompute OR NOT"
        " EXISTS (SELECT 1 FROM image_results r WHERE r.result_key = q.result_key AND r.status"
        " <> 'pending' AND r.expires_at > clock_timestamp()) ON CONFLICT DO NOTHING");
    tx.commit();
    added = static_cast<size_t>(res.affected_rows());
  });
  if (err)
    return err;
  return added;
}

caf::expected<image_pending> write_image_pending(pg_pool& pool,
                                                 const std::vector<image_request>& reqs) {
  image_pending out;
  std::vector<std::string> misses;
  for (auto& r : reqs)
    if (!r.recompute)
      misses.push_back(r.key);
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out = {};
    pqxx::work tx{c};
    // now(): the transaction's start, the same for every row, so `undo_image_pending` finds
    // exactly these; a result stored after this transaction has a later clock_timestamp().
    auto res = reqs.empty() ? tx.exec("SELECT " + std::string{epoch_us("now()")})
                            : tx.exec("WITH r AS (" + upsert_pending(tx, reqs, "now()")
                                      + ") SELECT " + epoch_us("now()")
                                      + " FROM (SELECT"
                                        " count(*) FROM r) n");
    out.asked_at_us = res[0][0].as<int64_t>();
    if (!misses.empty())
      for (auto row : tx.exec("SELECT result_key FROM image_results WHERE result_key IN ("
                              + quoted_list(tx, misses)
                              + ") AND status <> 'pending' AND expires_at > clock_timestamp()"))
        out.answered.insert(row[0].as<std::string>());
    tx.commit();
  });
  if (err)
    return err;
  return out;
}

caf::error undo_image_pending(pg_pool& pool, const std::vector<std::string>& keys,
                              int64_t asked_at_us) {
  if (keys.empty())
    return {};
  return with_connection(pool, [&](pqxx::connection& c) {
    pqxx::nontransaction tx{c};
    tx.exec("DELETE FROM image_results WHERE result_key IN (" + quoted_list(tx, keys)
            + ") AND status = 'pending' AND " + epoch_us("updated_at") + " = "
            + std::to_string(asked_at_us));
  });
}

caf::expected<std::vector<image_task>> take_image_tasks(pg_pool& pool, const std::string& function,
                                                        const std::vector<uint32_t>& partitions,
                                                        size_t limit,
                                                        std::chrono::milliseconds visibility) {
  std::vector<image_task> out;
  if (partitions.empty() || limit == 0)
    return out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.clear();
    pqxx::work tx{c};
    auto r = tx.exec(
      "UPDATE image_tasks t SET due_at = clock_timestamp() + " + ms_interval(visibility.count())
      + " FROM (SELECT function, partition, args FROM image_tasks WHERE function = "
      + tx.quote(function) + " AND partition IN (" + number_list(partitions)
      + ") AND due_at <= clock_timestamp() ORDER BY created_at LIMIT " + std::to_string(limit)
      + " FOR UPDATE SKIP LOCKED) s"
        " WHERE t.function = s.function AND t.partition = s.partition AND t.args = s.args"
        " RETURNING t.function, t.partition, t.args, t.attempts, t.ttl_ms,"
        " (extract(epoch FROM t.created_at) * 1000000)::bigint, coalesce(t.last_error, '')");
    tx.commit();
    for (auto row : r)
      out.push_back({row[0].as<std::string>(), row[1].as<uint32_t>(), row[2].as<std::string>(),
                     row[3].as<int32_t>(), row[4].as<int64_t>(), row[5].as<int64_t>(),
                     row[6].as<std::string>()});
  });
  if (err)
    return err;
  std::sort(out.begin(), out.end(), [](const image_task& a, const image_task& b) {
    return a.created_at_us < b.created_at_us;
  });
  return out;
}

caf::error finish_image_tasks(pg_pool& pool,
                              const std::vector<std::pair<image_task, image_result>>& done,
                              const std::vector<outbox_append>& outbox,
                              std::map<std::string, int64_t>* expires_at_us) {
  if (done.empty())
    return {};
  return with_connection(pool, [&](pqxx::connection& c) {
    pqxx::work tx{c};
    blob_params blobs;
    values_list results, tasks;
    std::map<std::string, size_t> last; // the last result of each key wins
    for (size_t i = 0; i < done.size(); ++i)
      last[done[i].second.key] = i;
    for (auto& [key, i] : last) {
      auto& [t, r] = done[i];
      results.row(tx.quote(key) + "," + tx.quote(t.function) + "," + tx.quote(t.args) + ","
                  + tx.quote(r.status) + ","
                  + (r.status == "done" ? blobs.add(r.value) : std::string{"NULL::bytea"}) + ","
                  + (r.error_kind.empty() ? "NULL" : tx.quote(r.error_kind)) + ","
                  + (r.error.empty() ? "NULL" : tx.quote(r.error)) + ","
                  + std::to_string(r.attempts) + ", clock_timestamp() + " + ms_interval(t.ttl_ms));
    }
    for (auto& [t, r] : done)
      tasks.row(task_pk(tx, t));
    auto stored = blobs.exec(
      tx, "WITH r AS (INSERT INTO image_results (result_key, function, args, status,"
          " value, error_kind, error, attempts, expires_at) VALUES "
            + results.str()
            + " ON CONFLICT (result_key) DO UPDATE SET status = EXCLUDED.status,"
              " value = EXCLUDED.value, error_kind = EXCLUDED.error_kind,"
              " error = EXCLUDED.error, attempts = EXCLUDED.attempts,"
              " expires_at = EXCLUDED.expires_at, updated_at = clock_timestamp()"
              " RETURNING result_key, (extract(epoch FROM expires_at) * 1000000)::bigint),"
              " d AS (DELETE FROM image_tasks WHERE (function, partition, args) IN ("
            + tasks.str()
            + "))"
              " SELECT * FROM r");
    std::map<std::string, int64_t> expires;
    for (auto row : stored)
      expires[row[0].as<std::string>()] = row[1].as<int64_t>();
    if (!outbox.empty()) {
      blob_params payloads;
      values_list rows;
      for (auto& o : outbox)
        rows.row(std::to_string(o.shard) + "," + std::to_string(o.events) + ","
                 + payloads.add(o.payload));
      payloads.exec(tx, "INSERT INTO outbox_batches (shard, events, payload) VALUES " + rows.str());
    }
    tx.commit();
    if (expires_at_us != nullptr)
      *expires_at_us = std::move(expires);
  });
}

caf::error retry_image_task(pg_pool& pool, const image_task& task, const std::string& error,
                            std::chrono::milliseconds delay) {
  return with_connection(pool, [&](pqxx::connection& c) {
    pqxx::nontransaction tx{c};
    auto due = "clock_timestamp() + $5 * interval '1 millisecond'";
    if (task.in_table)
      tx.exec_params("UPDATE image_tasks SET attempts = attempts + 1, last_error = $4, due_at = "
                       + std::string{due} + " WHERE function = $1 AND partition = $2 AND args = $3",
                     task.function, task.partition, task.args, error,
                     static_cast<int64_t>(delay.count()));
    else // from Kafka: its retries run from this queue (a row there already is the same task)
      tx.exec_params("INSERT INTO image_tasks (function, partition, args, attempts, last_error,"
                     " due_at, ttl_ms) VALUES ($1, $2, $3, $6, $4, "
                       + std::string{due}
                       + ", $7) ON CONFLICT (function, partition, args) DO UPDATE SET"
                         " attempts = image_tasks.attempts + 1, last_error = EXCLUDED.last_error,"
                         " due_at = EXCLUDED.due_at",
                     task.function, task.partition, task.args, error,
                     static_cast<int64_t>(delay.count()), task.attempts + 1, task.ttl_ms);
  });
}

caf::expected<size_t> reap_image_results(pg_pool& pool, size_t limit) {
  size_t n = 0;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    pqxx::nontransaction tx{c};
    auto r = tx.exec("DELETE FROM image_results WHERE result_key IN (SELECT result_key FROM"
                     " image_results WHERE expires_at <= clock_timestamp() LIMIT "
                     + std::to_string(limit) + ")");
    n = r.affected_rows();
  });
  if (err)
    return err;
  return n;
}

caf::expected<std::vector<std::pair<std::string, int64_t>>> count_image_tasks(pg_pool& pool) {
  std::vector<std::pair<std::string, int64_t>> out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.clear();
    pqxx::nontransaction tx{c};
    for (auto row : tx.exec("SELECT function, count(*) FROM image_tasks GROUP BY function"
                            " ORDER BY function"))
      out.emplace_back(row[0].as<std::string>(), row[1].as<int64_t>());
  });
  if (err)
    return err;
  return out;
}

} // namespace gost::persistence
