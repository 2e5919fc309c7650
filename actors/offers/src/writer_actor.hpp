#pragma once
// Internal: the write-behind writer, spawned by its shard.

#include <chrono>
#include <memory>

#include "gost/offers/protocol.hpp"
#include "gost/core/stats.hpp"

namespace gost::persistence {
class pg_pool;
}

namespace gost::detail {

struct writer_args {
  persistence::pg_pool* pool = nullptr;
  uint32_t shard = 0;
  int64_t epoch = 0;
  size_t max_batch = 500;
  std::chrono::milliseconds flush_delay{2};
  std::shared_ptr<node_stats> stats;
};

writer_actor spawn_writer(caf::local_actor* parent, writer_args args);

} // namespace gost::detail
