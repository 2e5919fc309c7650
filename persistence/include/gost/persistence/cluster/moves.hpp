#pragma once
// Moving a shard range to another group online (issue 28, ADR 0023 decision 5; `gostctl
// move-shards`): copy, catch up, fence, switch, clean. The rows of the range are copied to the
// target group's database while the source keeps serving; rows written meanwhile are logged by
// triggers on the source (migration 0024) and copied again until a round is small; then the
// range's leases in the source are fenced (epoch + 1, owned by nobody who can write: in-flight
// commits finish first, later ones fail their lease check), the last changes are copied, the
// outbox, parked outbox and dead letters of the range are moved, the target's lease rows start
// at the fenced epochs, and one catalog transaction points the range at the target (the map's
// version grows, `gost_groups` is notified: the nodes take the leases in the target). The
// source's rows are deleted last. Every step can run again: a move cut short is resumed by
// asking for it again.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include <caf/expected.hpp>

#include "gost/persistence/cluster/groups.hpp"

namespace gost::persistence {

class pg_pool;

/// A move the map allows.
struct move_plan {
  uint32_t first = 0;
  uint32_t last = 0;
  uint32_t from = 0; ///< the group holding the range now
  uint32_t to = 0;
  std::string from_name;
  std::string to_name;
  bool resumed = false;     ///< the map says this move began already
  bool whole = true;        ///< the range is every shard the source group holds
  uint32_t shard_count = 0; ///< the installation's (a row's home shard is its key's hash mod it)
};

/// Checks moving shards `first`..`last` to the group named `to` against `map`: the plan, or
/// what is wrong in words saying what to fix. The range lies in one group, whole or a part of
/// it (a split: the rows without a shard column go by their key's home shard, ADR 0023); one
/// move at a time; the same move again resumes it. A part of a group holding offers is refused
/// by `move_shards` (below), which sees the data.
std::variant<move_plan, std::string> plan_move(const group_map& map, uint32_t first, uint32_t last,
                                               const std::string& to);

struct move_options {
  int batch = 500;      ///< rows per copy statement
  int small_round = 64; ///< catch-up rounds go on until one copies at most this many rows
  int max_rounds = 30;  ///< then the fence comes anyway
  /// A node counts as running while its heartbeat is this recent: each node running in the
  /// source group must run in the target too (it opens the groups declared at its start).
  std::chrono::milliseconds node_timeout{10'000};
  /// Asked between batches before the fence (the node stops: run the move again to resume).
  /// After the fence the move finishes, since the range serves nowhere until it does.
  std::function<bool()> cancelled;
  /// Told each step as it goes (`step` is prepare, copy, catch-up, fence, switch or clean).
  std::function<void(const std::string& step, const std::string& detail)> progress;
  /// Move a part of a group that holds offers: the offers the cut leaves outside their
  /// seller's home group get their keys claimed at the fence (ADR 0023 "Splits" item 6).
  /// gostd's `MoveShards` (`gostctl move-shards`) sets it; off, such a part is refused
  /// (FAILED_PRECONDITION: move the whole group), for a library user whose nodes do not run
  /// the writers' home checks (`commit_options::home_shard`).
  bool split_offers = false;
};

struct move_report {
  std::map<std::string, int64_t> copied; ///< rows by table, first pass
  int64_t caught_up = 0;                 ///< rows copied again (or deleted) after it
  int rounds = 0;                        ///< catch-up rounds, the fenced one included
  int64_t moved_queued = 0; ///< outbox batches, parked ones, dead letters (offers', entities')
  std::chrono::milliseconds fenced{}; ///< from the fence to the switch
  int64_t removed = 0;                ///< rows deleted from the source
  /// A part: the keys of offers left outside their seller's home group ("strays") claimed at
  /// the fence in the home group's database (offer_keys), and the sellers given a spread row.
  int64_t claimed = 0;
  int64_t spread = 0;
  /// Claims dropped at the target for offers of the range whose seller is at home there: an
  /// earlier split's strays come home.
  int64_t unclaimed = 0;
  uint64_t map_version = 0; ///< the map's version after the switch
};

/// Runs the move `plan` between the groups' databases `source` and `target`, the map in
/// `catalog`. Refused before anything is written when a node running in the source group does
/// not run in the target one, and, without `move_options::split_offers`, when a part of a group
/// is asked for while the source holds offers (move the whole group). Every part's rows of the
/// range move (entities' outputs stay at the source, where consumers' positions point).
caf::expected<move_report> move_shards(pg_pool& catalog, pg_pool& source, pg_pool& target,
                                       const move_plan& plan, const move_options& opts);

/// Every table with a `shard` column the move knows: copied, moved with new ids, or the
/// leases. A table added with a `shard` column must
/// be one of them (moves.pgtest.cpp checks the schema).
std::vector<std::string> move_covered_tables();

} // namespace gost::persistence
