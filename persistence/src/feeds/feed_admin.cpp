#include "gost/persistence/feeds/feed_admin.hpp"

#include "feeds/feed_internal.hpp"
#include "gost/v1/feed_service.pb.h"
#include "pg_internal.hpp"

namespace gost::persistence {

namespace {

using namespace feed_sql;

/// The advisory lock class of a stored feed file's last reference ('gosf'), keyed by the
/// hash of its name: two nodes cleaning the two last loads of one file one after the other, so
/// that the second sees the first's row gone and the file is removed (not kept by both).
constexpr int32_t file_lock_class = 1735357302;

constexpr const char* feed_columns =
  "f.seller_id, f.namespace, f.version, f.removed, f.settings, coalesce(f.url, ''),"
  " coalesce(f.period_ms, 0), (extract(epoch FROM f.last_fetched_at) * 1000000)::bigint,"
  " (extract(epoch FROM f.next_fetch_at) * 1000000)::bigint,"
  " (extract(epoch FROM f.created_at) * 1000000)::bigint,"
  " (extract(epoch FROM f.updated_at) * 1000000)::bigint,"
  " coalesce((SELECT max(l.load_id) FROM feed_loads l WHERE l.seller_id = f.seller_id"
  "           AND l.namespace = f.namespace), 0)";

feed_row feed_of(const pqxx::row& r) {
  feed_row f;
  f.seller_id = r[0].as<std::string>();
  f.ns = r[1].as<std::string>();
  f.version = r[2].as<int64_t>();
  f.removed = r[3].as<bool>();
  f.settings = pqxx::binarystring{r[4]}.str();
  f.url = r[5].as<std::string>();
  f.period_ms = r[6].as<int64_t>();
  if (!r[7].is_null())
    f.last_fetched_at = from_us(r[7].as<int64_t>());
  if (!r[8].is_null())
    f.next_fetch_at = from_us(r[8].as<int64_t>());
  f.created_at = from_us(r[9].as<int64_t>());
  f.updated_at = from_us(r[10].as<int64_t>());
  f.last_load_id = r[11].as<int64_t>();
  return f;
}

std::optional<feed_row> select_feed(pqxx::transaction_base& tx, const std::string& seller,
                                    const std::string& ns, bool for_update) {
  auto rows = tx.exec_params(std::string("SELECT ") + feed_columns
                               + " FROM feeds f WHERE f.seller_id = $1 AND f.namespace = $2"
                               + (for_update ? " FOR UPDATE OF f" : ""),
                             seller, ns);
  if (rows.empty())
    return std::nullopt;
  return feed_of(rows[0]);
}

/// Writes `s` over the feed's row: settings, schedule (a new or changed URL is due now), a
/// version one higher, not removed.
void rewrite_feed(pqxx::transaction_base& tx, const feed_spec& s) {
  tx.exec_params(
    "UPDATE feeds SET version = version + 1, removed = false, settings = $3,"
    " url = nullif($4, ''), period_ms = CASE WHEN $4 = '' THEN NULL ELSE $5::bigint END,"
    " next_fetch_at = CASE WHEN $4 = '' THEN NULL"
    "   WHEN removed OR url IS DISTINCT FROM $4 OR next_fetch_at IS NULL THEN now()"
    "   ELSE least(next_fetch_at,"
    "              coalesce(last_fetched_at, now()) + $5::bigint * interval '1 ms') END,"
    " updated_at = now()"
    " WHERE seller_id = $1 AND namespace = $2",
    s.seller_id, s.ns, pqxx::binarystring{s.settings}, s.url, s.period_ms);
}

std::string feed_name(const std::string& seller, const std::string& ns) {
  return seller + "/" + ns;
}

} // namespace

caf::expected<feed_row> create_feed(pg_pool& pool, const feed_spec& s) {
  return in_work<feed_row>(pool, [&](pqxx::work& tx, feed_row& out, caf::error& refused) {
    auto made = tx.exec_params(
      "INSERT INTO feeds (seller_id, namespace, settings, url, period_ms, next_fetch_at)"
      " VALUES ($1, $2, $3, nullif($4, ''), CASE WHEN $4 = '' THEN NULL ELSE $5::bigint END,"
      "         CASE WHEN $4 = '' THEN NULL ELSE now() END)"
      " ON CONFLICT DO NOTHING RETURNING 1",
      s.seller_id, s.ns, pqxx::binarystring{s.settings}, s.url, s.period_ms);
    if (made.empty()) {
      auto had = select_feed(tx, s.seller_id, s.ns, true);
      if (!had) { // removed meanwhile: cannot happen (rows are never deleted); say so
        refused = make_db_error(db_errc::unavailable, "the feed changed meanwhile; retry");
        return;
      }
      if (had->removed) {
        rewrite_feed(tx, s);
      } else if (had->settings != s.settings) {
        refused = make_db_error(db_errc::already_exists, "the feed " + feed_name(s.seller_id, s.ns)
                                                           + " exists with other settings (version "
                                                           + std::to_string(had->version)
                                                           + "); UpdateFeed changes them");
        return;
      } else {
        out = std::move(*had); // the same settings: a no-op
        return;
      }
    }
    out = *select_feed(tx, s.seller_id, s.ns, false);
  });
}

caf::expected<feed_row> update_feed(pg_pool& pool, const feed_spec& s, int64_t expected_version) {
  return in_work<feed_row>(pool, [&](pqxx::work& tx, feed_row& out, caf::error& refused) {
    auto had = select_feed(tx, s.seller_id, s.ns, true);
    if (!had) {
      refused = make_db_error(db_errc::not_found,
                              "no feed " + feed_name(s.seller_id, s.ns) + "; CreateFeed makes it");
      return;
    }
    if (had->removed) {
      refused = make_db_error(db_errc::conflict, "the feed " + feed_name(s.seller_id, s.ns)
                                                   + " is removed; CreateFeed makes it again");
      return;
    }
    if (expected_version != 0 && had->version != expected_version) {
      refused = make_db_error(db_errc::conflict,
                              "expected_version: the feed " + feed_name(s.seller_id, s.ns)
                                + " is at version " + std::to_string(had->version) + ", not "
                                + std::to_string(expected_version));
      return;
    }
    rewrite_feed(tx, s);
    out = *select_feed(tx, s.seller_id, s.ns, false);
  });
}

caf::expected<feed_removal> remove_feed(pg_pool& pool, const std::string& seller,
                                        const std::string& ns, bool make_manual) {
  return in_work<feed_removal>(pool, [&](pqxx::work& tx, feed_removal& out, caf::error& refused) {
    auto had = select_feed(tx, seller, ns, true);
    if (!had) {
      refused = make_db_error(db_errc::not_found, "no feed " + feed_name(seller, ns));
      return;
    }
    if (had->removed) {
      auto closing = tx.exec_params("SELECT max(load_id) FROM feed_loads WHERE seller_id = $1"
                                    " AND namespace = $2 AND origin = 'delete'",
                                    seller, ns);
      out.already = true;
      out.load_id = closing[0][0].is_null() ? 0 : closing[0][0].as<int64_t>();
      return;
    }
    tx.exec_params("UPDATE feeds SET removed = true, version = version + 1, next_fetch_at = NULL,"
                   " updated_at = now() WHERE seller_id = $1 AND namespace = $2",
                   seller, ns);
    // Loads that did not start: they will not (their queue rows go with them).
    out.cancelled =
      tx.exec_params("WITH c AS (UPDATE feed_loads SET status = 'cancelled', updated_at = now()"
                     "   WHERE seller_id = $1 AND namespace = $2"
                     "     AND status IN ('fetching', 'queued') RETURNING load_id)"
                     " DELETE FROM feed_queue q USING c WHERE q.seller_id = $1"
                     "   AND q.load_id = c.load_id RETURNING 1",
                     seller, ns)
        .affected_rows();
    v1::FeedSettings settings;
    if (!settings.ParseFromString(had->settings))
      settings.Clear(); // stored by gost: never; the closing load needs only `missing`
    settings.set_missing(make_manual ? v1::FeedSettings::MAKE_MANUAL : v1::FeedSettings::DELETE);
    std::string closing_settings;
    settings.SerializeToString(&closing_settings);
    new_feed_load n;
    n.seller_id = seller;
    n.ns = ns;
    n.origin = "delete";
    auto closing = insert_load(tx, n, had->version + 1, closing_settings);
    out.load_id = closing.load_id;
    // The feed's whole history goes (the closing load stays: it says what became of the offers).
    tx.exec_params("INSERT INTO feed_old_loads (seller_id, load_id)"
                   " SELECT seller_id, load_id FROM feed_loads"
                   " WHERE seller_id = $1 AND namespace = $2 AND load_id <> $3"
                   " ON CONFLICT DO NOTHING",
                   seller, ns, closing.load_id);
  });
}

caf::expected<feed_row> get_feed(pg_pool& pool, const std::string& seller, const std::string& ns) {
  std::optional<feed_row> out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    pqxx::read_transaction tx{c};
    out = select_feed(tx, seller, ns, false);
  });
  if (err)
    return err;
  if (!out)
    return make_db_error(db_errc::not_found, "no feed " + feed_name(seller, ns));
  return std::move(*out);
}

caf::expected<std::vector<feed_row>> list_feeds(pg_pool& pool, const std::string& seller,
                                                bool include_removed) {
  std::vector<feed_row> out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.clear();
    pqxx::read_transaction tx{c};
    for (auto r :
         tx.exec_params(std::string("SELECT ") + feed_columns
                          + " FROM feeds f WHERE f.seller_id = $1 AND ($2 OR NOT f.removed)"
                            " ORDER BY f.namespace LIMIT 1000",
                        seller, include_removed))
      out.push_back(feed_of(r));
  });
  if (err)
    return err;
  return out;
}

caf::expected<std::vector<feed_load_row>> list_feed_loads(pg_pool& pool, const std::string& seller,
                                                          const std::string& ns,
                                                          int64_t before_load_id, int limit) {
  std::vector<feed_load_row> out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.clear();
    pqxx::read_transaction tx{c};
    for (auto r : tx.exec_params(std::string("SELECT ") + load_columns
                                   + " FROM feed_loads l LEFT JOIN feed_statistics s"
                                     " ON s.seller_id = l.seller_id AND s.load_id = l.load_id"
                                     " WHERE l.seller_id = $1 AND l.namespace = $2"
                                     "   AND ($3::bigint = 0 OR l.load_id < $3::bigint)"
                                     " ORDER BY l.load_id DESC LIMIT $4",
                                 seller, ns, before_load_id, limit))
      out.push_back(load_of(r));
  });
  if (err)
    return err;
  return out;
}

namespace {

constexpr const char* error_filter = " WHERE seller_id = $1 AND load_id = $2"
                                     "   AND ($3 = '' OR error_level = $3)"
                                     "   AND ($4 = '' OR error_type = $4)";

std::vector<feed_offer_error> error_page(pqxx::transaction_base& tx, const feed_error_query& q) {
  std::vector<feed_offer_error> out;
  for (auto r : tx.exec_params(std::string("SELECT external_id, error_id, error_level, error_type,"
                                           " field, title, line, error_message"
                                           " FROM feed_offer_errors")
                                 + error_filter
                                 + " AND (external_id, error_id) > ($5, $6)"
                                   " ORDER BY external_id, error_id LIMIT $7",
                               q.seller_id, q.load_id, q.level, q.type, q.after_external_id,
                               q.after_error_id, q.limit)) {
    feed_offer_error e;
    e.external_id = r[0].as<std::string>();
    e.error_id = r[1].as<int64_t>();
    e.level = r[2].as<std::string>();
    e.type = r[3].as<std::string>();
    e.field = r[4].as<std::string>();
    e.title = r[5].as<std::string>();
    e.line = r[6].as<int64_t>();
    e.message = r[7].as<std::string>();
    out.push_back(std::move(e));
  }
  return out;
}

} // namespace

caf::expected<feed_error_page> list_feed_errors(pg_pool& pool, const feed_error_query& q) {
  feed_error_page out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    pqxx::read_transaction tx{c};
    out.errors = error_page(tx, q);
    out.total =
      tx.exec_params1(std::string("SELECT count(*) FROM feed_offer_errors") + error_filter,
                      q.seller_id, q.load_id, q.level, q.type)[0]
        .as<int64_t>();
  });
  if (err)
    return err;
  return out;
}

caf::error
for_each_feed_error(pg_pool& pool, feed_error_query q, int page_size,
                    const std::function<bool(const std::vector<feed_offer_error>&)>& page) {
  q.after_external_id.clear();
  q.after_error_id = -1;
  q.limit = std::max(page_size, 1);
  for (;;) {
    std::vector<feed_offer_error> rows;
    auto err = with_connection(pool, [&](pqxx::connection& c) {
      pqxx::read_transaction tx{c};
      rows = error_page(tx, q);
    });
    if (err)
      return err;
    if (rows.empty() || !page(rows) || rows.size() < static_cast<size_t>(q.limit))
      return {};
    q.after_external_id = rows.back().external_id;
    q.after_error_id = rows.back().error_id;
  }
}

caf::expected<feed_cleanup>
clean_old_feed_loads(pg_pool& pool, int limit,
                     const std::function<caf::expected<bool>(const std::string&)>& used_elsewhere) {
  feed_cleanup out;
  caf::error elsewhere;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out = feed_cleanup{};
    elsewhere = caf::error{};
    pqxx::work tx{c};
    auto old = tx.exec_params("SELECT o.seller_id, o.load_id, coalesce(l.sha256, '')"
                              " FROM feed_old_loads o LEFT JOIN feed_loads l"
                              "   ON l.seller_id = o.seller_id AND l.load_id = o.load_id"
                              " ORDER BY o.load_id, o.seller_id LIMIT $1"
                              " FOR UPDATE OF o SKIP LOCKED",
                              limit);
    for (auto r : old) {
      auto seller = r[0].as<std::string>();
      auto id = r[1].as<int64_t>();
      auto file = r[2].as<std::string>();
      // In the seed's order: the data of the load, then its file, then the load itself.
      for (const char* table : {"feed_offer_errors", "feed_offer_batches", "feed_statistics"})
        tx.exec_params(std::string("DELETE FROM ") + table
                         + " WHERE seller_id = $1 AND load_id = $2",
                       seller, id);
      if (!file.empty()) {
        tx.exec_params("SELECT pg_advisory_xact_lock($1, hashtext($2))", file_lock_class, file);
        bool shared = !tx.exec_params("SELECT 1 FROM feed_loads WHERE sha256 = $1"
                                      " AND NOT (seller_id = $2 AND load_id = $3) LIMIT 1",
                                      file, seller, id)
                         .empty();
        if (!shared && used_elsewhere) {
          auto there = used_elsewhere(file);
          if (!there) {
            elsewhere = std::move(there.error());
            return; // not committed: the step is undone
          }
          shared = *there;
        }
        if (!shared)
          out.blobs.push_back(file);
      }
      tx.exec_params("DELETE FROM feed_queue WHERE seller_id = $1 AND load_id = $2", seller, id);
      tx.exec_params("DELETE FROM feed_loads WHERE seller_id = $1 AND load_id = $2", seller, id);
      tx.exec_params("DELETE FROM feed_old_loads WHERE seller_id = $1 AND load_id = $2", seller,
                     id);
      ++out.loads;
    }
    tx.commit();
  });
  if (err)
    return err;
  if (elsewhere)
    return elsewhere;
  return out;
}

caf::expected<bool> feed_file_in_use(pg_pool& pool, const std::string& sha256) {
  bool used = false;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    pqxx::nontransaction tx{c};
    used = !tx.exec_params("SELECT 1 FROM feed_loads WHERE sha256 = $1 LIMIT 1", sha256).empty();
  });
  if (err)
    return err;
  return used;
}

} // namespace gost::persistence
