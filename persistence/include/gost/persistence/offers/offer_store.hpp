#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gost/persistence/errors.hpp"

namespace gost::v1 {
class Offer;
}

namespace gost::persistence {

class pg_pool;

/// A page of a seller's offers in one database (offer_store::list_by_seller).
struct seller_page {
  std::vector<v1::Offer> offers;
  /// Shards outside the seller's home group holding offers of it (`seller_spread`, read in
  /// the home database); empty unless a split left some of its offers there. The groups
  /// holding these shards now have the rest of the seller's offers.
  std::vector<uint32_t> spread;
};

/// The first `limit` offers of the pages of one seller read in several groups' databases, in
/// id byte order; an offer in two pages (a move's rows not yet removed) counts once, the first
/// page's copy kept (pass the home group's first).
std::vector<v1::Offer> merge_pages(std::vector<std::vector<v1::Offer>> pages, size_t limit);

/// Offers in the `offers` table: the protobuf body plus the columns needed to find and route
/// them (id, shard, the seller's key, version). Every write is a compare-and-set on version.
///
/// Blocking: call it from a thread that may block (a detached actor), never from CAF's
/// scheduler threads.
class offer_store {
public:
  explicit offer_store(pg_pool& pool) : pool_(pool) {}

  /// The offer or nullopt when there is none.
  caf::expected<std::optional<v1::Offer>> load(const std::string& offer_id);

  /// Inserts a new offer with version 1 (the caller set id and timestamps).
  /// `already_exists` when the id or the seller's key is taken.
  caf::error insert(const v1::Offer& offer, uint32_t shard);

  /// Replaces the stored offer when its version is still `expected_version`; the new body
  /// must carry `expected_version + 1`. `conflict` when the version moved, `not_found` when
  /// the offer is gone.
  caf::error update(const v1::Offer& offer, int64_t expected_version);

  /// Deletes the offer when its version is `expected_version`.
  caf::error remove(const std::string& offer_id, int64_t expected_version);

  /// The offer id stored under the seller's key, if any.
  caf::expected<std::optional<std::string>>
  find_id(const std::string& seller_id, const std::string& ns, const std::string& external_id);

  /// Removes the claim of the seller's key held for `offer_id` (`offer_keys`: an offer a
  /// split left in another group's database), if there is one: call it only once that offer's
  /// owner answered it is gone. True when a claim was removed.
  caf::expected<bool> drop_claim(const std::string& seller_id, const std::string& ns,
                                 const std::string& external_id, const std::string& offer_id);

  /// A page of a seller's offers in this database, in id order (the column's collation, which
  /// `offers_by_seller` serves; byte order in the project's C.UTF-8 databases, as the merge
  /// across groups sorts), after `after_id` (empty: from the start), at most `limit`;
  /// with `ns`, only that namespace. Bodies with their stored versions. In the seller's home
  /// database it also names the shards outside it holding offers of the seller (a split left
  /// them there: `seller_spread`, ADR 0023), in the same round trip: the pages of their
  /// groups' databases, read alike, merge with this one (`merge_pages`).
  caf::expected<seller_page> list_by_seller(const std::string& seller_id,
                                            const std::optional<std::string>& ns,
                                            const std::string& after_id, size_t limit);

private:
  pg_pool& pool_;
};

} // namespace gost::persistence
