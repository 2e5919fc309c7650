#pragma once
// What every entity kind's write-behind writes have in common: a write-set travels with the
// shard it belongs to and the lease epoch it was computed under, and comes back with one of
// these outcomes. Batches of many shards commit in one transaction; each set is fenced by its
// own shard's epoch.

#include <cstdint>

namespace gost::persistence {

enum class write_outcome : uint8_t {
  committed,
  conflict,  ///< the entity's version moved (or it is gone): reload and redo
  fenced,    ///< this node does not hold the shard at this epoch: stop the shard
  duplicate, ///< its request id committed before: nothing applied; answer what was answered
  /// A unique key the set would give its entity is another entity's: nothing applied, and a
  /// redo would meet the same key (answer ALREADY_EXISTS).
  key_taken,
  /// A new entity's unique key lives in its owner's home shard, and that shard is not in the
  /// entity's database (a split moved the one or the other since the entity's id was drawn,
  /// ADR 0023): nothing applied; the caller retries (UNAVAILABLE), drawing the id in the new
  /// home group.
  home_moved,
  /// A key change whose old or new owner (a seller) has its home shard in another shard group's
  /// database than the entity's: the key's index and claims are there, not here (ADR 0023
  /// "Splits"). Nothing applied; a redo would meet the same (answer FAILED_PRECONDITION).
  key_elsewhere,
};

/// A write-set of `WriteSet`'s kind for one shard at one lease epoch.
template <class WriteSet>
struct fenced_write {
  uint32_t shard = 0;
  int64_t epoch = 0;
  WriteSet ws;
};

} // namespace gost::persistence
