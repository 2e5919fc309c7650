#pragma once
// Internal to persistence/src/feeds/: the statements feed_loads.cpp (the pipeline's side) and
// feed_admin.cpp (the API's side) share, so a load is made, read and queued for cleanup by one
// piece of SQL whoever asks.

#include <chrono>
#include <optional>
#include <string>

#include <pqxx/pqxx>

#include "gost/persistence/feeds/feed_loads.hpp"
#include "pg_internal.hpp"

namespace gost::persistence::feed_sql {

/// A time read as microseconds since the epoch (`extract(epoch FROM t) * 1000000`).
std::chrono::system_clock::time_point from_us(int64_t us);

/// The columns `load_of` reads, from feed_loads `l` left-joined with feed_statistics `s`.
extern const char* const load_columns;

feed_load_row load_of(const pqxx::row& r);

std::optional<feed_load_row> select_load(pqxx::transaction_base& tx, const std::string& seller,
                                         int64_t load_id);

/// Queues the ended loads of a feed beyond the newest `keep` for cleanup (seed option 2).
void queue_old_loads(pqxx::transaction_base& tx, const std::string& seller, const std::string& ns,
                     int keep);

/// Inserts a load of a feed whose row the caller locked, made with `feed_version` and
/// `settings` (serialized gost.v1.FeedSettings), and its queue row: `fetching` (stage fetch)
/// with a source URL, else `queued` (stage process). Loads beyond `n.keep_loads` (this one
/// counted) are queued for cleanup. The new load.
feed_load_row insert_load(pqxx::transaction_base& tx, const new_feed_load& n, int64_t feed_version,
                          const std::string& settings);

/// Runs `fn` in a write transaction; a refusal it sets is returned instead of a result.
template <class T, class Fn>
caf::expected<T> in_work(pg_pool& pool, Fn fn) {
  T out{};
  caf::error refused;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    refused = caf::error{};
    out = T{};
    pqxx::work tx{c};
    fn(tx, out, refused);
    if (!refused)
      tx.commit();
  });
  if (err)
    return err;
  if (refused)
    return refused;
  return out;
}

} // namespace gost::persistence::feed_sql
