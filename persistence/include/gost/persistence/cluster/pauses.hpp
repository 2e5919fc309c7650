#pragma once
// Stages paused by operators, cluster-wide (table stage_pauses, migration 0013). A change
// notifies the cluster channel, so every node looks at once instead of at its next heartbeat.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/expected.hpp>

namespace gost::persistence {

class pg_pool;

struct stage_pause {
  std::string stage_id;
  std::string paused_by;
  int64_t paused_at_us = 0; ///< µs since the Unix epoch
};

/// Every paused stage, by stage id.
caf::expected<std::vector<stage_pause>> list_stage_pauses(pg_pool& pool);

/// Pauses `stage_id` (kept as it is when already paused); true when it was not paused before.
caf::expected<bool> pause_stage(pg_pool& pool, const std::string& stage_id, const std::string& who);

/// Resumes `stage_id`; true when it was paused.
caf::expected<bool> resume_stage(pg_pool& pool, const std::string& stage_id);

} // namespace gost::persistence
