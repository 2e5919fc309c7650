#pragma once
// The offers' history (table offer_history, migration 0014; docs/adr/0010-offer-history.md):
// every committed change's outbox event, written by commit_write_sets (commit_options::history)
// in the batch's transaction; read back by AdminService.OfferHistory; reaped by housekeeping.

#include <cstdint>
#include <string>
#include <vector>

#include "gost/persistence/errors.hpp"

namespace gost::persistence {

class pg_pool;

/// One committed change of an offer.
struct history_row {
  int64_t id = 0;      ///< commit order (over all offers)
  int64_t version = 0; ///< the offer's version after the change
  int64_t at_us = 0;   ///< commit time, µs since the Unix epoch
  std::string event;   ///< serialized gost.v1.OfferSaved
};

/// The offer's changes, newest first, with id below `before_id` (0: from the newest), at most
/// `limit`.
caf::expected<std::vector<history_row>> read_history(pg_pool& pool, const std::string& offer_id,
                                                     int64_t before_id, size_t limit);

/// Forgets the changes of `shards` older than `max_age_s` seconds (0: all of them, the history
/// being off); how many went.
caf::expected<int64_t> reap_history(pg_pool& pool, const std::vector<uint32_t>& shards,
                                    int64_t max_age_s);

} // namespace gost::persistence
