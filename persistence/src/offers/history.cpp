#include "gost/persistence/offers/history.hpp"

#include "pg_internal.hpp"

namespace gost::persistence {

caf::expected<std::vector<history_row>> read_history(pg_pool& pool, const std::string& offer_id,
                                                     int64_t before_id, size_t limit) {
  std::vector<history_row> out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.clear();
    pqxx::nontransaction tx{c};
    auto r = tx.exec_params("SELECT id, version,"
                            " (extract(epoch FROM at) * 1000000)::bigint, event"
                            " FROM offer_history WHERE offer_id = $1 AND ($2 = 0 OR id < $2)"
                            " ORDER BY id DESC LIMIT $3",
                            offer_id, before_id, static_cast<int64_t>(limit));
    out.reserve(r.size());
    for (auto row : r)
      out.push_back({row[0].as<int64_t>(), row[1].as<int64_t>(), row[2].as<int64_t>(),
                     pqxx::binarystring{row[3]}.str()});
  });
  if (err)
    return err;
  return out;
}

caf::expected<int64_t> reap_history(pg_pool& pool, const std::vector<uint32_t>& shards,
                                    int64_t max_age_s) {
  return reap_by_age(pool, "offer_history", "at", shards, max_age_s);
}

} // namespace gost::persistence
