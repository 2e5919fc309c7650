#pragma once

#include <atomic>
#include <cstdint>

namespace gost {

/// Counters the actors of one node keep up to date and the node exports (Prometheus). Shared
/// by all shards of a node; relaxed atomics, read without stopping anyone.
struct node_stats {
  std::atomic<int64_t> resident_offer_actors{0};
  std::atomic<uint64_t> offer_actors_spawned{0};
  std::atomic<uint64_t> offer_actors_passivated{0};
  std::atomic<uint64_t> offer_actors_crashed{0};
  std::atomic<uint64_t> write_batches{0};
  std::atomic<uint64_t> stage_runs{0};
  std::atomic<uint64_t> stage_failures{0};
  std::atomic<uint64_t> stage_conflicts{0};
  std::atomic<uint64_t> change_storms_cut{0};
  std::atomic<uint64_t> dead_letters{0};
};

} // namespace gost
