#include "gost/persistence/offers/offer_store.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>

#include "gost/v1/offer.pb.h"
#include "pg_internal.hpp"

namespace gost::persistence {

namespace {

// NULL for an empty external id, so the unique key only covers offers that have one.
const std::string* nullable(const std::string& s) {
  return s.empty() ? nullptr : &s;
}

caf::error decode(const pqxx::field& f, v1::Offer& out) {
  pqxx::binarystring bytes{f};
  if (!out.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return make_db_error(db_errc::internal, "stored offer body does not parse as gost.v1.Offer");
  return caf::error{};
}

} // namespace

caf::expected<std::optional<v1::Offer>> offer_store::load(const std::string& offer_id) {
  std::optional<v1::Offer> out;
  caf::error decode_err;
  auto err = with_connection(pool_, [&](pqxx::connection& c) {
    out.reset();
    pqxx::nontransaction tx{c};
    auto r = tx.exec_params("SELECT body, version FROM offers WHERE offer_id = $1", offer_id);
    if (r.empty())
      return;
    out.emplace();
    decode_err = decode(r[0][0], *out);
    out->set_version(r[0][1].as<int64_t>()); // the column is authoritative
  });
  if (err)
    return err;
  if (decode_err)
    return decode_err;
  return out;
}

caf::error offer_store::insert(const v1::Offer& offer, uint32_t shard) {
  std::string body;
  offer.SerializeToString(&body);
  return with_connection(pool_, [&](pqxx::connection& c) {
    pqxx::nontransaction tx{c}; // one statement: autocommit saves two round trips
    tx.exec_params("INSERT INTO offers (offer_id, shard, seller_id, namespace, external_id,"
                   " version, body) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                   offer.id(), static_cast<int64_t>(shard), offer.seller_id(), offer.namespace_(),
                   nullable(offer.external_id()), offer.version(), pqxx::binarystring{body});
  });
}

caf::error offer_store::update(const v1::Offer& offer, int64_t expected_version) {
  std::string body;
  offer.SerializeToString(&body);
  bool updated = false;
  bool exists = false;
  auto err = with_connection(pool_, [&](pqxx::connection& c) {
    pqxx::nontransaction tx{c};
    auto r =
      tx.exec_params("UPDATE offers SET version = $2, body = $3, seller_id = $4, namespace = $5,"
                     " external_id = $6, updated_at = now() WHERE offer_id = $1 AND version = $7",
                     offer.id(), offer.version(), pqxx::binarystring{body}, offer.seller_id(),
                     offer.namespace_(), nullable(offer.external_id()), expected_version);
    updated = r.affected_rows() == 1;
    if (!updated)
      exists = !tx.exec_params("SELECT 1 FROM offers WHERE offer_id = $1", offer.id()).empty();
  });
  if (err)
    return err;
  if (!updated)
    return exists ? make_db_error(db_errc::conflict, "offer " + offer.id() + " is not at version "
                                                       + std::to_string(expected_version))
                  : make_db_error(db_errc::not_found, "offer " + offer.id() + " does not exist");
  return caf::error{};
}

caf::error offer_store::remove(const std::string& offer_id, int64_t expected_version) {
  bool removed = false;
  bool exists = false;
  auto err = with_connection(pool_, [&](pqxx::connection& c) {
    pqxx::nontransaction tx{c};
    auto r = tx.exec_params("DELETE FROM offers WHERE offer_id = $1 AND version = $2", offer_id,
                            expected_version);
    removed = r.affected_rows() == 1;
    if (!removed)
      exists = !tx.exec_params("SELECT 1 FROM offers WHERE offer_id = $1", offer_id).empty();
  });
  if (err)
    return err;
  if (!removed)
    return exists ? make_db_error(db_errc::conflict, "offer " + offer_id + " is not at version "
                                                       + std::to_string(expected_version))
                  : make_db_error(db_errc::not_found, "offer " + offer_id + " does not exist");
  return caf::error{};
}

caf::expected<std::optional<std::string>> offer_store::find_id(const std::string& seller_id,
                                                               const std::string& ns,
                                                               const std::string& external_id) {
  std::optional<std::string> out;
  auto err = with_connection(pool_, [&](pqxx::connection& c) {
    out.reset();
    pqxx::nontransaction tx{c};
    // The key's offer in this (the seller's home) database, or its claim by an offer a split
    // left in another group's (migration 0031; almost always an empty table).
    auto r = tx.exec_params("SELECT offer_id FROM offers WHERE seller_id = $1 AND namespace = $2"
                            " AND external_id = $3 UNION ALL SELECT offer_id FROM offer_keys"
                            " WHERE seller_id = $1 AND namespace = $2 AND external_id = $3"
                            " LIMIT 1",
                            seller_id, ns, external_id);
    if (!r.empty())
      out = r[0][0].as<std::string>();
  });
  if (err)
    return err;
  return out;
}

caf::expected<bool> offer_store::drop_claim(const std::string& seller_id, const std::string& ns,
                                            const std::string& external_id,
                                            const std::string& offer_id) {
  bool dropped = false;
  auto err = with_connection(pool_, [&](pqxx::connection& c) {
    pqxx::nontransaction tx{c};
    dropped = !tx.exec_params("DELETE FROM offer_keys WHERE seller_id = $1 AND namespace = $2"
                              " AND external_id = $3 AND offer_id = $4 RETURNING 1",
                              seller_id, ns, external_id, offer_id)
                 .empty();
  });
  if (err)
    return err;
  return dropped;
}

caf::expected<seller_page> offer_store::list_by_seller(const std::string& seller_id,
                                                       const std::optional<std::string>& ns,
                                                       const std::string& after_id, size_t limit) {
  seller_page out;
  auto err = with_connection(pool_, [&](pqxx::connection& c) {
    out = {};
    pqxx::nontransaction tx{c};
    // The page, and the shards a split left offers of the seller on (almost always none: an
    // index probe of an empty table), in one round trip.
    // In the column's collation, which `offers_by_seller` is ordered by (`COLLATE "C"` here
    // would read and sort all of the seller's offers for every page: 33 ms against 0.4 ms for
    // a seller of 20,000, measured); the project's databases are C.UTF-8 (byte order, as the
    // merge across groups sorts), and gost's offer ids are ASCII.
    auto sql = std::string{"WITH p AS (SELECT offer_id, body, version FROM offers"
                           " WHERE seller_id = $1 AND offer_id > $2"}
               + (ns ? " AND namespace = $4" : "")
               + " ORDER BY offer_id LIMIT $3)"
                 " SELECT body, version, NULL::int FROM p UNION ALL SELECT NULL, NULL,"
                 " stray_shard FROM seller_spread WHERE seller_id = $1";
    auto r = ns ? tx.exec_params(sql, seller_id, after_id, static_cast<int64_t>(limit), *ns)
                : tx.exec_params(sql, seller_id, after_id, static_cast<int64_t>(limit));
    for (auto row : r) {
      if (!row[2].is_null()) {
        out.spread.push_back(row[2].as<uint32_t>());
        continue;
      }
      v1::Offer o;
      if (!o.ParseFromString(pqxx::binarystring{row[0]}.str()))
        throw std::runtime_error("a stored offer body does not parse as gost.v1.Offer");
      o.set_version(row[1].as<int64_t>());
      out.offers.push_back(std::move(o));
    }
  });
  if (err)
    return err;
  // The CTE's order is not promised through UNION ALL.
  std::stable_sort(out.offers.begin(), out.offers.end(),
                   [](const v1::Offer& a, const v1::Offer& b) { return a.id() < b.id(); });
  return out;
}

std::vector<v1::Offer> merge_pages(std::vector<std::vector<v1::Offer>> pages, size_t limit) {
  std::vector<v1::Offer> all;
  std::set<std::string> seen;
  for (auto& page : pages)
    for (auto& o : page)
      if (seen.insert(o.id()).second)
        all.push_back(std::move(o));
  std::stable_sort(all.begin(), all.end(),
                   [](const v1::Offer& a, const v1::Offer& b) { return a.id() < b.id(); });
  if (all.size() > limit)
    all.resize(limit);
  return all;
}

} // namespace gost::persistence
