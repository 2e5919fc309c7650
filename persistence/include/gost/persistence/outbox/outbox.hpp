#pragma once
// The read side of the transactional outbox: committed batches of saved-offer events
// (`outbox_batches`, written by commit_write_sets) and of other messages (the image
// functions' notifications, written by finish_image_tasks) for the relay that publishes them.

#include <cstdint>
#include <string>
#include <vector>

#include "gost/persistence/errors.hpp"

namespace gost::persistence {

class pg_pool;

struct outbox_row {
  int64_t id = 0;
  uint32_t shard = 0;
  int32_t events = 0;
  std::string payload; ///< serialized gost.v1.OutboxBatch
};

/// A row to add to the outbox in the transaction of the writes it tells of.
struct outbox_append {
  uint32_t shard = 0;  ///< the relay of the node owning this shard publishes it
  int32_t events = 0;  ///< messages in `payload`
  std::string payload; ///< serialized gost.v1.OutboxBatch
};

/// The oldest rows of the given shards, in id order (commit order), at most `limit`.
caf::expected<std::vector<outbox_row>>
read_outbox(pg_pool& pool, const std::vector<uint32_t>& shards, size_t limit);

/// Deletes published rows.
caf::error delete_outbox(pg_pool& pool, const std::vector<int64_t>& ids);

/// A row the broker refused for good (migration 0022, `outbox_parked`): what was refused.
struct parked_outbox_row {
  int64_t id = 0; ///< its id in outbox_batches (kept: a retry puts it back under it)
  uint32_t shard = 0;
  int32_t events = 0;
  std::string topic;     ///< of the refused message
  std::string key;       ///< of the refused message (an offer id for an after-save event)
  int64_t bytes = 0;     ///< the refused message's value size
  std::string reason;    ///< the class: message_too_large, invalid_record, not_authorized, ...
  std::string error;     ///< librdkafka's text
  int64_t parked_us = 0; ///< microseconds since the Unix epoch
};

/// Moves outbox row `p.id` (if still there) into outbox_parked with `p`'s details, in one
/// transaction; false when the row was gone already (another relay took it).
caf::expected<bool> park_outbox(pg_pool& pool, const parked_outbox_row& p);

/// Parked rows with an id above `after_id`, by id, at most `limit` (no payload).
caf::expected<std::vector<parked_outbox_row>> list_parked_outbox(pg_pool& pool, int64_t after_id,
                                                                 size_t limit);

/// Puts the parked rows `ids` back into outbox_batches under their old ids (the relay of
/// their shard publishes them next, before the shard's later rows); returns how many.
caf::expected<uint64_t> retry_parked_outbox(pg_pool& pool, const std::vector<int64_t>& ids);

/// Deletes the parked rows `ids` (their events are never published); returns how many.
caf::expected<uint64_t> drop_parked_outbox(pg_pool& pool, const std::vector<int64_t>& ids);

} // namespace gost::persistence
