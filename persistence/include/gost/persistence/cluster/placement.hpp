#pragma once
// Where a shard's rows are now (ADR 0023): the database of the group holding the shard, as the
// node sees the group map — current after a range moved (the node's placement follows the
// map; runtime/node). The parts that keep rows of their own per shard (scheduled actions'
// queues and the actions themselves, by an id's home shard) ask it instead of holding one
// pool. Thread-safe: read by gRPC threads and workers alike.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include <caf/expected.hpp>

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

/// A list call across groups (ADR 0023): `read(pg_pool&)` gives a group's page, its first
/// `limit` rows after the caller's position in `less` order (byte order for ids: each
/// group's query sorts `COLLATE "C"`); the first `limit` of their union, in that order, is the
/// page across groups, and the next page starts after its last row in every group. A group
/// failing fails the call.
template <class T, class Read, class Less>
caf::expected<std::vector<T>> merged_page(const shard_placement& where, size_t limit, Read read,
                                          Less less) {
  std::vector<T> all;
  for (auto g : where.groups()) {
    auto* db = where.database(g);
    if (db == nullptr)
      continue;
    caf::expected<std::vector<T>> page = read(*db);
    if (!page)
      return std::move(page.error());
    for (auto& x : *page)
      all.push_back(std::move(x));
  }
  std::sort(all.begin(), all.end(), less);
  if (all.size() > limit)
    all.resize(limit);
  return all;
}

/// One database holding every shard: an installation of one group, and the tests.
std::shared_ptr<const shard_placement> one_database(pg_pool& pool, uint32_t shard_count);

} // namespace gost::persistence
