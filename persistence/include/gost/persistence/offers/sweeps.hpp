#pragma once
// One-off sweeps (migration 0021): a shard's background rescan for one stage, run once per
// token (`shard_options::sweeps`, actors/offers spawn.hpp). Each shard records how far it came,
// so an interrupted sweep resumes and a finished one never runs again.

#include <cstdint>
#include <string>

#include "gost/persistence/errors.hpp"

namespace gost::persistence {

class pg_pool;

/// How far one shard came in one sweep.
struct sweep_progress {
  std::string after_id; ///< the last offer passed ("" : from the start)
  int64_t enqueued = 0; ///< offers enqueued so far
  bool done = false;
};

/// The progress of `token` on `shard` (a fresh one when never recorded).
caf::expected<sweep_progress> load_sweep(pg_pool& pool, const std::string& token, uint32_t shard);

/// Records the progress of `token` on `shard` (insert or overwrite).
caf::error save_sweep(pg_pool& pool, const std::string& token, uint32_t shard,
                      const sweep_progress& p);

} // namespace gost::persistence
