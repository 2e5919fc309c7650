#pragma once
// Where a shard's rows are now (ADR 0023): the database of the group holding the shard, as the
// node sees the group map — current after a range moved (the node's placement follows the
// map; runtime/node). The parts that keep rows of their own per shard (scheduled actions'
// queues and the actions themselves, by an id's home shard) ask it instead of holding one
// pool. Thread-safe: read by gRPC threads and workers alike.

#include <cstdint>
#include <memory>
#include <vector>

namespace gost::persistence {

class pg_pool;

class shard_placement {
public:
  virtual ~shard_placement() = default;

  virtual uint32_t shard_count() const = 0;

  /// The group holding `shard` now.
  virtual uint32_t group_of(uint32_t shard) const = 0;

  /// The database of group `group`; null for a group this node does not reach (a declared
  /// group skipped at the start: it holds no shard).
  virtual pg_pool* database(uint32_t group) const = 0;

  /// The groups this node serves, each once, in id order: what a list reads in turn.
  virtual std::vector<uint32_t> groups() const = 0;

  /// The database holding `shard` now (its group always has one: a group holding shards is
  /// never skipped).
  pg_pool& of_shard(uint32_t shard) const { return *database(group_of(shard)); }
};

/// One database holding every shard: an installation of one group, and the tests.
std::shared_ptr<const shard_placement> one_database(pg_pool& pool, uint32_t shard_count);

} // namespace gost::persistence
