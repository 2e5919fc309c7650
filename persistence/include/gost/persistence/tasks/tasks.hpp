#pragma once
// The task groups of seed 002 (migration 0012, docs/tasks.md). Tasks themselves are durable
// entities (entities/entities.hpp): their states, events and results are the kit's rows; a
// group is what an operator creates before sending tasks to it.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <caf/expected.hpp>

namespace gost::persistence {

class pg_pool;

/// A group: one task type fed by one source system, with its settings.
struct task_group {
  std::string group_id;
  std::string task_type;
  std::string source;
  int64_t retry_delay_ms = 0;
  int32_t max_attempts = 0;
};

/// Creates `g` unless a group with its id exists; returns the group as stored (the existing
/// one when it was there: the caller tells a retry from a conflict by comparing).
caf::expected<task_group> create_task_group(pg_pool& pool, const task_group& g);

/// The group `group_id`, or none.
caf::expected<std::optional<task_group>> find_task_group(pg_pool& pool,
                                                         const std::string& group_id);

/// An entity as listed: its id and tag.
struct tagged_entity {
  std::string id;
  std::string tag;
};

/// The entities of `kind` in `lane` tagged `tag` (empty: with any tag), after `after_id`
/// (exclusive; empty: from the start), in id order (bytes: `COLLATE "C"`, so pages of several
/// groups merge), at most `limit`.
caf::expected<std::vector<tagged_entity>>
list_tagged_entities(pg_pool& pool, const std::string& kind, const std::string& lane,
                     const std::string& tag, const std::string& after_id, size_t limit);

} // namespace gost::persistence
