#include "gost/persistence/offers/dead_letters.hpp"

#include "pg_internal.hpp"

namespace gost::persistence {

namespace {

/// The filter's conditions on dead_letters, parameters $1..$4 (ids as a bigint[] literal).
constexpr const char* open_matching =
  "released_at IS NULL"
  " AND ($1::text = '{}' OR id = ANY($1::bigint[]))"
  " AND ($2::text = '' OR stage_id = $2::text)"
  " AND ($3::bigint = 0 OR created_at >= to_timestamp($3::bigint / 1e6))"
  " AND ($4::bigint = 0 OR created_at < to_timestamp($4::bigint / 1e6))";

std::string id_array(const std::vector<int64_t>& ids) {
  std::string out = "{";
  for (size_t i = 0; i < ids.size(); ++i)
    out += (i ? "," : "") + std::to_string(ids[i]);
  return out + "}";
}

} // namespace

caf::expected<std::vector<dead_letter_row>>
list_dead_letters(pg_pool& pool, const dead_letter_filter& f, int64_t after_id, size_t limit) {
  std::vector<dead_letter_row> out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.clear();
    pqxx::nontransaction tx{c};
    auto sql = std::string{"SELECT id, shard, offer_id, stage_id, reason, attempts,"
                           " (extract(epoch FROM created_at) * 1000000)::bigint"
                           " FROM dead_letters WHERE "}
               + open_matching + " AND id > $5::bigint ORDER BY id LIMIT $6::bigint";
    for (auto row : tx.exec_params(sql, id_array(f.ids), f.stage_id, f.since_us, f.until_us,
                                   after_id, static_cast<int64_t>(limit))) {
      dead_letter_row d;
      d.id = row[0].as<int64_t>();
      d.shard = row[1].as<uint32_t>();
      d.offer_id = row[2].as<std::string>();
      d.stage_id = row[3].as<std::string>();
      d.reason = row[4].as<std::string>();
      d.attempts = row[5].as<int32_t>();
      d.created_us = row[6].as<int64_t>();
      out.push_back(std::move(d));
    }
  });
  if (err)
    return err;
  return out;
}

caf::expected<uint64_t> discard_dead_letters(pg_pool& pool, const dead_letter_filter& f) {
  uint64_t out = 0;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    pqxx::work tx{c};
    auto r = tx.exec_params(std::string{"UPDATE dead_letters SET released_at = now() WHERE "}
                              + open_matching,
                            id_array(f.ids), f.stage_id, f.since_us, f.until_us);
    out = r.affected_rows();
    tx.commit();
  });
  if (err)
    return err;
  return out;
}

} // namespace gost::persistence
