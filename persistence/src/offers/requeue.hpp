#pragma once
// Internal to persistence/: an operator's re-queue inside a transaction of the caller's
// (requeue_offer, retry_dead_letters). Never include from other folders.

#include <cstdint>
#include <optional>
#include <string>

#include <pqxx/pqxx>

#include "gost/persistence/queue.hpp"

namespace gost::persistence {

/// Puts offer `offer_id` into the queue of `stage_id`, due at `due_us` (or earlier, when it is
/// queued already), in `tx`. Returns the entry, or nullopt when the offer does not exist.
std::optional<queue_entry> requeue_in(pqxx::transaction_base& tx, const std::string& offer_id,
                                      const std::string& stage_id, int64_t due_us);

} // namespace gost::persistence
