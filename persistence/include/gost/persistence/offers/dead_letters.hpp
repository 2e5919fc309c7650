#pragma once
// The operators' side of the dead_letters table (migration 0002): list the open letters, and
// release them (gostctl deadletters / retry-dead / discard-dead, docs/console.md). A retry's
// requeue is the offer owner's write (AdminService asks it, under the lease fence); it releases
// here only the letters whose requeue the owner took.

#include <cstdint>
#include <string>
#include <vector>

#include "gost/persistence/errors.hpp"

namespace gost::persistence {

class pg_pool;

/// One open dead letter (released_at IS NULL).
struct dead_letter_row {
  int64_t id = 0;
  uint32_t shard = 0;
  std::string offer_id;
  std::string stage_id;
  std::string reason;
  int32_t attempts = 1;
  int64_t created_us = 0; ///< microseconds since the Unix epoch
};

/// Which open letters: all given conditions hold. Empty `ids`, empty `stage_id` and 0 times
/// leave that condition out.
struct dead_letter_filter {
  std::vector<int64_t> ids;
  std::string stage_id;
  int64_t since_us = 0; ///< created at or after
  int64_t until_us = 0; ///< created before

  /// No condition at all: every open letter.
  bool empty() const { return ids.empty() && stage_id.empty() && since_us == 0 && until_us == 0; }
};

/// Open letters matching `f` with an id above `after_id`, by id, at most `limit`.
caf::expected<std::vector<dead_letter_row>>
list_dead_letters(pg_pool& pool, const dead_letter_filter& f, int64_t after_id, size_t limit);

/// Releases the open letters matching `f` without queueing anything; returns how many.
caf::expected<uint64_t> discard_dead_letters(pg_pool& pool, const dead_letter_filter& f);

} // namespace gost::persistence
