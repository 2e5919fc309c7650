#pragma once
// The node's answer to "which database holds this shard now" (persistence/cluster/placement.hpp):
// the router's shard → group, which follows the group map after a range moved (follow_map in
// node/start_cluster.cpp), and the pool of each group the node serves.

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "gost/persistence/cluster/placement.hpp"

namespace gost::runtime {

class router;

/// `pools`: (group id, its pool) for every group the node serves, the pools outliving the
/// placement's users. Weak on the router (its handles go at the node's stop): once gone, the
/// shards' groups are read from `at_start` (each shard's group when the node started).
std::shared_ptr<const persistence::shard_placement>
routed_placement(std::weak_ptr<const router> routes,
                 std::vector<std::pair<uint32_t, persistence::pg_pool*>> pools,
                 std::vector<uint32_t> at_start);

} // namespace gost::runtime
