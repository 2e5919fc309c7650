#pragma once
// What every entity kind's durable queues have in common: an entry says that an entity has
// work in a lane (a stage's queue for offers, a task group's queue for tasks), due at a time.
// A timer is an entry due in the future. An entity is in a lane at most once.

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace gost::persistence {

/// Queue priorities (e.g. column stage_states.priority).
enum class priority : int16_t { normal = 0, background = 1 };

struct queue_entry {
  std::string lane;      ///< the queue: a stage id (offers), a task group (tasks), ...
  std::string entity_id; ///< whose work it is
  int64_t due_at_us = 0; ///< microseconds since the Unix epoch
  priority prio = priority::normal;
};

using queue_entries = std::vector<queue_entry>;

/// A due read answers a page of entries due until `until_us`, then as a hint the first entry
/// due after it (kit::queue_store). Puts that one last, whatever order the rows came in.
inline void hint_last(queue_entries& entries, int64_t until_us) {
  auto past = std::find_if(entries.begin(), entries.end(),
                           [&](const queue_entry& e) { return e.due_at_us > until_us; });
  if (past != entries.end() && past + 1 != entries.end())
    std::rotate(past, past + 1, entries.end());
}

} // namespace gost::persistence
