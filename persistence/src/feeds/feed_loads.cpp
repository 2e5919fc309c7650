#include "gost/persistence/feeds/feed_loads.hpp"

#include "feeds/feed_internal.hpp"
#include "pg_internal.hpp"

namespace gost::persistence {

namespace feed_sql {

const char* const load_columns =
  "l.seller_id, l.namespace, l.load_id, l.feed_version, l.origin, l.status, l.settings,"
  " coalesce(l.source_url, ''), coalesce(l.sha256, ''), coalesce(l.bytes, 0),"
  " coalesce(l.format, ''), coalesce(l.error_kind, ''), coalesce(l.error_message, ''),"
  " l.attempts, (extract(epoch FROM l.created_at) * 1000000)::bigint,"
  " (extract(epoch FROM l.updated_at) * 1000000)::bigint, s.statistics";

std::chrono::system_clock::time_point from_us(int64_t us) {
  return std::chrono::system_clock::time_point{std::chrono::microseconds{us}};
}

feed_load_row load_of(const pqxx::row& r) {
  feed_load_row l;
  l.seller_id = r[0].as<std::string>();
  l.ns = r[1].as<std::string>();
  l.load_id = r[2].as<int64_t>();
  l.feed_version = r[3].as<int64_t>();
  l.origin = r[4].as<std::string>();
  l.status = r[5].as<std::string>();
  l.settings = pqxx::binarystring{r[6]}.str();
  l.source_url = r[7].as<std::string>();
  l.sha256 = r[8].as<std::string>();
  l.bytes = r[9].as<int64_t>();
  l.format = r[10].as<std::string>();
  l.error_kind = r[11].as<std::string>();
  l.error_message = r[12].as<std::string>();
  l.attempts = r[13].as<int32_t>();
  l.created_at = from_us(r[14].as<int64_t>());
  l.updated_at = from_us(r[15].as<int64_t>());
  if (!r[16].is_null())
    l.statistics = pqxx::binarystring{r[16]}.str();
  return l;
}

std::optional<feed_load_row> select_load(pqxx::transaction_base& tx, const std::string& seller,
                                         int64_t load_id) {
  auto rows = tx.exec_params(std::string("SELECT ") + load_columns
                               + " FROM feed_loads l LEFT JOIN feed_statistics s"
                                 " ON s.seller_id = l.seller_id AND s.load_id = l.load_id"
                                 " WHERE l.seller_id = $1 AND l.load_id = $2",
                             seller, load_id);
  if (rows.empty())
    return std::nullopt;
  return load_of(rows[0]);
}

void queue_old_loads(pqxx::transaction_base& tx, const std::string& seller, const std::string& ns,
                     int keep) {
  tx.exec_params("INSERT INTO feed_old_loads (seller_id, load_id)"
                 " SELECT seller_id, load_id FROM feed_loads"
                 " WHERE seller_id = $1 AND namespace = $2"
                 "   AND status IN ('failed', 'succeeded', 'cancelled')"
                 " ORDER BY load_id DESC OFFSET $3"
                 " ON CONFLICT DO NOTHING",
                 seller, ns, std::max(keep, 1));
}

feed_load_row insert_load(pqxx::transaction_base& tx, const new_feed_load& n, int64_t feed_version,
                          const std::string& settings) {
  bool fetching = !n.source_url.empty();
  auto id =
    tx.exec_params1(
        "INSERT INTO feed_loads (seller_id, load_id, namespace, feed_version, origin, status,"
        " settings, source_url, sha256, bytes)"
        " VALUES ($1, nextval('feed_load_ids'), $2, $3, $4, $5, $6, nullif($7, ''), nullif($8, ''),"
        " $9) RETURNING load_id",
        n.seller_id, n.ns, feed_version, n.origin, fetching ? "fetching" : "queued",
        pqxx::binarystring{settings}, n.source_url, n.sha256, n.bytes)[0]
      .as<int64_t>();
  tx.exec_params("INSERT INTO feed_queue (seller_id, load_id, stage) VALUES ($1, $2, $3)",
                 n.seller_id, id, fetching ? "fetch" : "process");
  // The loads this one supersedes count too: only the newest `keep_loads` stay.
  queue_old_loads(tx, n.seller_id, n.ns, n.keep_loads - 1);
  return *select_load(tx, n.seller_id, id);
}

} // namespace feed_sql

namespace {

using namespace feed_sql;

const char* context_of(const std::string& stage) {
  return stage == "fetch" ? "feedloader" : "feedprocessor";
}

/// Inserts a load of the feed row (version, settings) locked by the caller.
feed_load_row insert_load(pqxx::transaction_base& tx, const new_feed_load& n,
                          const pqxx::row& feed) {
  return feed_sql::insert_load(tx, n, feed[0].as<int64_t>(), pqxx::binarystring{feed[1]}.str());
}

} // namespace

caf::expected<feed_load_row> create_feed_load(pg_pool& pool, const new_feed_load& n) {
  return in_work<feed_load_row>(pool, [&](pqxx::work& tx, feed_load_row& out, caf::error& refused) {
    auto feed = tx.exec_params("SELECT version, settings, removed FROM feeds"
                               " WHERE seller_id = $1 AND namespace = $2 FOR UPDATE",
                               n.seller_id, n.ns);
    if (feed.empty()) {
      refused = make_db_error(db_errc::not_found,
                              "no feed " + n.seller_id + "/" + n.ns + "; create it first");
      return;
    }
    if (feed[0][2].as<bool>()) {
      refused = make_db_error(db_errc::conflict, "the feed " + n.seller_id + "/" + n.ns
                                                   + " is removed; create it again first");
      return;
    }
    out = insert_load(tx, n, feed[0]);
  });
}

caf::expected<std::vector<feed_load_row>> schedule_due_feeds(pg_pool& pool, int limit,
                                                             int keep_loads) {
  std::vector<feed_load_row> out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.clear();
    pqxx::work tx{c};
    // Oldest fetch first (seed: "по возрастанию last_fetched_at"); SKIP LOCKED lets nodes
    // schedule side by side. A feed with a fetch still waiting is not scheduled again.
    auto due =
      tx.exec_params("SELECT f.seller_id, f.namespace, f.version, f.settings, f.url FROM feeds f"
                     " WHERE NOT f.removed AND f.next_fetch_at <= now()"
                     "   AND NOT EXISTS (SELECT 1 FROM feed_loads l WHERE l.seller_id = f.seller_id"
                     "                   AND l.namespace = f.namespace AND l.status = 'fetching')"
                     " ORDER BY f.next_fetch_at, f.last_fetched_at NULLS FIRST LIMIT $1"
                     " FOR UPDATE OF f SKIP LOCKED",
                     limit);
    for (const auto& f : due) {
      new_feed_load n;
      n.seller_id = f[0].as<std::string>();
      n.ns = f[1].as<std::string>();
      n.origin = "url";
      n.source_url = f[4].as<std::string>();
      n.keep_loads = keep_loads;
      auto feed = tx.exec_params1("SELECT version, settings FROM feeds"
                                  " WHERE seller_id = $1 AND namespace = $2",
                                  n.seller_id, n.ns);
      out.push_back(insert_load(tx, n, feed));
      tx.exec_params("UPDATE feeds SET next_fetch_at = now() + period_ms * interval '1 ms'"
                     " WHERE seller_id = $1 AND namespace = $2",
                     n.seller_id, n.ns);
    }
    tx.commit();
  });
  if (err)
    return err;
  return out;
}

caf::expected<std::optional<feed_job>> take_feed_work(pg_pool& pool, const std::string& stage,
                                                      const std::string& node_id) {
  std::optional<feed_job> out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.reset();
    pqxx::work tx{c};
    const char* ctx = context_of(stage);
    // The oldest due work of a seller that no node works on in this context; its lock taken
    // in the same transaction (a seller locked meanwhile by another node: nothing this time).
    // Only a seller's oldest due row may be picked: SKIP LOCKED passes over a row another
    // node has just picked but not yet locked the seller for, and without the second NOT
    // EXISTS this node could take the seller's next load and win the lock, sending a
    // seller's loads out of order.
    auto pick = tx.exec_params(
      "SELECT q.seller_id, q.load_id, q.attempts FROM feed_queue q"
      " WHERE q.stage = $1 AND q.not_before <= now()"
      "   AND NOT EXISTS (SELECT 1 FROM feed_locks k WHERE k.context = $2"
      "                   AND k.seller_id = q.seller_id)"
      "   AND NOT EXISTS (SELECT 1 FROM feed_queue o"
      "                   WHERE o.seller_id = q.seller_id AND o.stage = q.stage"
      "                     AND o.not_before <= now()"
      "                     AND (o.created_at, o.load_id) < (q.created_at, q.load_id))"
      " ORDER BY q.created_at, q.load_id LIMIT 1 FOR UPDATE OF q SKIP LOCKED",
      stage, ctx);
    if (pick.empty())
      return;
    auto seller = pick[0][0].as<std::string>();
    auto locked = tx.exec_params("INSERT INTO feed_locks (context, seller_id, node_id)"
                                 " VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING 1",
                                 ctx, seller, node_id);
    if (locked.empty())
      return;
    auto load = select_load(tx, seller, pick[0][1].as<int64_t>());
    if (!load)
      return;
    out = feed_job{std::move(*load), pick[0][2].as<int32_t>()};
    tx.commit();
  });
  if (err)
    return err;
  return out;
}

caf::error release_feed_lock(pg_pool& pool, const std::string& stage, const std::string& seller_id,
                             const std::string& node_id) {
  return with_connection(pool, [&](pqxx::connection& c) {
    pqxx::nontransaction tx{c};
    tx.exec_params("DELETE FROM feed_locks WHERE context = $1 AND seller_id = $2 AND node_id = $3",
                   context_of(stage), seller_id, node_id);
  });
}

namespace {

void unlock(pqxx::transaction_base& tx, const std::string& stage, const std::string& seller,
            const std::string& node) {
  tx.exec_params("DELETE FROM feed_locks WHERE context = $1 AND seller_id = $2 AND node_id = $3",
                 context_of(stage), seller, node);
}

} // namespace

caf::error feed_fetched(pg_pool& pool, const feed_job& job, const std::string& sha256,
                        int64_t bytes, const std::string& node_id) {
  auto& l = job.load;
  return with_connection(pool, [&](pqxx::connection& c) {
    pqxx::work tx{c};
    auto moved = tx.exec_params("UPDATE feed_loads SET status = 'queued', sha256 = $3,"
                                " bytes = $4, updated_at = now()"
                                " WHERE seller_id = $1 AND load_id = $2 AND status = 'fetching'"
                                " RETURNING 1",
                                l.seller_id, l.load_id, sha256, bytes);
    if (!moved.empty()) {
      tx.exec_params("UPDATE feed_queue SET stage = 'process', not_before = now(), attempts = 0"
                     " WHERE seller_id = $1 AND load_id = $2",
                     l.seller_id, l.load_id);
      if (l.origin == "url")
        tx.exec_params("UPDATE feeds SET last_fetched_at = now()"
                       " WHERE seller_id = $1 AND namespace = $2",
                       l.seller_id, l.ns);
    }
    unlock(tx, "fetch", l.seller_id, node_id);
    tx.commit();
  });
}

caf::error feed_failed(pg_pool& pool, const feed_job& job, const std::string& stage,
                       const std::string& kind, const std::string& message,
                       const std::string& node_id) {
  auto& l = job.load;
  return with_connection(pool, [&](pqxx::connection& c) {
    pqxx::work tx{c};
    tx.exec_params("UPDATE feed_loads SET status = 'failed', error_kind = $3,"
                   " error_message = $4, attempts = attempts + 1, updated_at = now()"
                   " WHERE seller_id = $1 AND load_id = $2"
                   "   AND status IN ('fetching', 'queued')",
                   l.seller_id, l.load_id, kind, message);
    tx.exec_params("DELETE FROM feed_queue WHERE seller_id = $1 AND load_id = $2", l.seller_id,
                   l.load_id);
    unlock(tx, stage, l.seller_id, node_id);
    tx.commit();
  });
}

caf::error feed_retry_later(pg_pool& pool, const feed_job& job, const std::string& stage,
                            std::chrono::milliseconds delay, const std::string& message,
                            const std::string& node_id) {
  auto& l = job.load;
  return with_connection(pool, [&](pqxx::connection& c) {
    pqxx::work tx{c};
    tx.exec_params("UPDATE feed_queue SET attempts = attempts + 1,"
                   " not_before = now() + $3 * interval '1 ms'"
                   " WHERE seller_id = $1 AND load_id = $2",
                   l.seller_id, l.load_id, static_cast<int64_t>(delay.count()));
    tx.exec_params("UPDATE feed_loads SET attempts = attempts + 1, error_message = $3,"
                   " updated_at = now() WHERE seller_id = $1 AND load_id = $2",
                   l.seller_id, l.load_id, message);
    unlock(tx, stage, l.seller_id, node_id);
    tx.commit();
  });
}

caf::error feed_sent(pg_pool& pool, const feed_job& job, const std::string& format,
                     const std::string& statistics, const std::string& node_id) {
  auto& l = job.load;
  return with_connection(pool, [&](pqxx::connection& c) {
    pqxx::work tx{c};
    tx.exec_params("UPDATE feed_loads SET status = 'in_progress', format = nullif($3, ''),"
                   " error_message = NULL, updated_at = now()"
                   " WHERE seller_id = $1 AND load_id = $2 AND status = 'queued'",
                   l.seller_id, l.load_id, format);
    tx.exec_params("INSERT INTO feed_statistics (seller_id, load_id, statistics)"
                   " VALUES ($1, $2, $3) ON CONFLICT (seller_id, load_id)"
                   " DO UPDATE SET statistics = EXCLUDED.statistics",
                   l.seller_id, l.load_id, pqxx::binarystring{statistics});
    tx.exec_params("DELETE FROM feed_queue WHERE seller_id = $1 AND load_id = $2", l.seller_id,
                   l.load_id);
    unlock(tx, "process", l.seller_id, node_id);
    tx.commit();
  });
}

namespace {

/// Inserts errors in statements of up to 500 rows; existing rows stay.
void insert_errors(pqxx::transaction_base& tx, const std::string& seller, int64_t load_id,
                   const std::vector<feed_offer_error>& errors, bool unless_processor_erred) {
  const size_t chunk = 500;
  for (size_t at = 0; at < errors.size(); at += chunk) {
    std::string sql = "INSERT INTO feed_offer_errors (seller_id, load_id, external_id, error_id,"
                      " error_level, error_type, field, title, line, error_message) ";
    std::string values;
    for (size_t i = at; i < std::min(errors.size(), at + chunk); ++i) {
      auto& e = errors[i];
      values += (values.empty() ? "" : ",") + std::string("(") + tx.quote(seller) + ","
                + std::to_string(load_id) + "," + tx.quote(e.external_id) + ","
                + std::to_string(e.error_id) + "," + tx.quote(e.level) + "," + tx.quote(e.type)
                + "," + tx.quote(e.field) + "," + tx.quote(e.title) + "," + std::to_string(e.line)
                + "," + tx.quote(e.message) + ")";
    }
    if (unless_processor_erred)
      sql += "SELECT v.* FROM (VALUES " + values
             + ") AS v(s, l, x, i, lv, t, f, ti, ln, m)"
               " WHERE NOT EXISTS (SELECT 1 FROM feed_offer_errors e WHERE e.seller_id = v.s"
               " AND e.load_id = v.l AND e.external_id = v.x AND e.error_id < 1000"
               " AND e.error_level = 'error')";
    else
      sql += "VALUES " + values;
    tx.exec(sql + " ON CONFLICT DO NOTHING");
  }
}

} // namespace

caf::error add_feed_offer_errors(pg_pool& pool, const std::string& seller_id, int64_t load_id,
                                 const std::vector<feed_offer_error>& errors) {
  if (errors.empty())
    return {};
  return with_connection(pool, [&](pqxx::connection& c) {
    pqxx::work tx{c};
    insert_errors(tx, seller_id, load_id, errors, false);
    tx.commit();
  });
}

caf::expected<bool> record_feed_answers(pg_pool& pool, const std::string& seller_id,
                                        int64_t load_id, const std::vector<std::string>& batch_ids,
                                        const std::vector<feed_offer_error>& rejected) {
  bool ours = false;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    pqxx::work tx{c};
    ours = !tx.exec_params("SELECT 1 FROM feed_loads WHERE seller_id = $1 AND load_id = $2"
                           " AND status = 'in_progress' FOR SHARE",
                           seller_id, load_id)
              .empty();
    if (!ours)
      return;
    for (auto& b : batch_ids)
      tx.exec_params("INSERT INTO feed_offer_batches (seller_id, load_id, batch_id)"
                     " VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
                     seller_id, load_id, b);
    insert_errors(tx, seller_id, load_id, rejected, true);
    tx.commit();
  });
  if (err)
    return err;
  return ours;
}

caf::expected<bool> feed_answered(pg_pool& pool, const std::string& seller_id, int64_t load_id,
                                  const std::string& statistics) {
  bool done = false;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    pqxx::work tx{c};
    done = !tx.exec_params("UPDATE feed_loads SET status = 'succeeded', updated_at = now()"
                           " WHERE seller_id = $1 AND load_id = $2 AND status = 'in_progress'"
                           " RETURNING 1",
                           seller_id, load_id)
              .empty();
    if (!done)
      return;
    tx.exec_params("INSERT INTO feed_statistics (seller_id, load_id, statistics)"
                   " VALUES ($1, $2, $3) ON CONFLICT (seller_id, load_id)"
                   " DO UPDATE SET statistics = EXCLUDED.statistics",
                   seller_id, load_id, pqxx::binarystring{statistics});
    tx.commit();
  });
  if (err)
    return err;
  return done;
}

caf::expected<feed_load_row> get_feed_load(pg_pool& pool, const std::string& seller_id,
                                           int64_t load_id) {
  std::optional<feed_load_row> out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    pqxx::read_transaction tx{c};
    out = select_load(tx, seller_id, load_id);
  });
  if (err)
    return err;
  if (!out)
    return make_db_error(db_errc::not_found,
                         "no load " + std::to_string(load_id) + " of seller " + seller_id);
  return std::move(*out);
}

caf::expected<int64_t> release_node_feed_locks(pg_pool& pool, const std::string& node_id) {
  int64_t n = 0;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    pqxx::nontransaction tx{c};
    n = tx.exec_params("DELETE FROM feed_locks WHERE node_id = $1", node_id).affected_rows();
  });
  if (err)
    return err;
  return n;
}

caf::expected<int64_t> reap_feed_locks(pg_pool& pool, std::chrono::milliseconds node_timeout,
                                       std::chrono::milliseconds max_hold) {
  int64_t n = 0;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    pqxx::nontransaction tx{c};
    n = tx.exec_params("DELETE FROM feed_locks k WHERE k.acquired < now() - $1 * interval '1 ms'"
                       " OR k.node_id IN (SELECT node_id FROM gone_nodes)"
                       " OR k.node_id IN (SELECT node_id FROM nodes WHERE leaving"
                       "                  OR heartbeat_at < now() - $2 * interval '1 ms')",
                       static_cast<int64_t>(max_hold.count()),
                       static_cast<int64_t>(node_timeout.count()))
          .affected_rows();
  });
  if (err)
    return err;
  return n;
}

} // namespace gost::persistence
