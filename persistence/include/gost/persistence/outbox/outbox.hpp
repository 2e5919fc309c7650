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

} // namespace gost::persistence
