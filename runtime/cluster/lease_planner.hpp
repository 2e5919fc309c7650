#pragma once
// Lease planning (plain class, no actors or storage, unit-tested): how many free shard leases
// this node takes, and which of its shards it hands to which node, so that every alive node
// holds an even share (seed 001's shard locks, docs/cluster.md). The cluster manager feeds it
// what it read from PostgreSQL and carries out its answers.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gost::runtime {

class lease_planner {
public:
  struct lease {
    uint32_t shard = 0;
    std::string owner;
    bool free = false; ///< nobody's, or its owner stopped heartbeating
  };
  struct held {
    uint32_t shard = 0;
    bool draining = false; ///< a hand-off in progress
  };

  lease_planner(std::string me, uint32_t shard_count, int max_moves);

  /// What the cluster looks like now: the alive nodes (this one counts even before its first
  /// heartbeat shows), every lease, this node's shards.
  void observe(const std::vector<std::string>& alive, const std::vector<lease>& leases,
               const std::vector<held>& mine);

  /// Below the even share (rounded up): take another free lease.
  bool wants_more() const { return mine_ < hi_; }
  /// A free lease was taken.
  void acquired();

  /// The next shard to hand off and the node to hand it to (the one with the fewest shards),
  /// or nothing: this node is not above its share, or `max_moves` hand-offs are in progress.
  std::optional<std::pair<uint32_t, std::string>> next_handoff();

  uint32_t share_low() const { return lo_; }
  uint32_t share_high() const { return hi_; }

private:
  std::string me_;
  uint32_t shard_count_;
  size_t max_moves_;
  std::map<std::string, uint32_t> load_; ///< alive nodes -> shards owned
  std::vector<uint32_t> handable_;       ///< this node's shards not moving, in shard order
  size_t mine_ = 0;
  size_t moving_ = 0;
  uint32_t hi_ = 0;
  uint32_t lo_ = 0;
};

} // namespace gost::runtime
