#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "gost/persistence/errors.hpp"

namespace gost::v1 {
class Offer;
}

namespace gost::persistence {

class pg_pool;

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

  /// A page of a seller's offers in id order, after `after_id` (empty: from the start), at
  /// most `limit`; with `ns`, only that namespace. Bodies with their stored versions.
  caf::expected<std::vector<v1::Offer>> list_by_seller(const std::string& seller_id,
                                                       const std::optional<std::string>& ns,
                                                       const std::string& after_id, size_t limit);

private:
  pg_pool& pool_;
};

} // namespace gost::persistence
