#pragma once
// The shard group map (issue 28, ADR 0023; plain class, no storage, unit-tested): which
// PostgreSQL database holds which shards. A group is a database; the map assigns it ranges
// of shards (one range at first, more after ranges moved in). Group 0 is the catalog
// database's own (the one `pg.dsn` names); an installation that declares no other group is
// group 0 holding every shard, as before groups existed. The map carries a version that
// grows with every change, so a node that hears of a change reads it again and keeps the
// newer one only.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <caf/expected.hpp>

namespace gost::persistence {

class pg_pool;

struct shard_group {
  uint32_t id = 0;  ///< 0: the catalog database's own group
  std::string name; ///< for people: logs, metrics, gostctl
  std::string dsn;  ///< empty for group 0 (the catalog's DSN, `pg.dsn`), set for the others
};

struct shard_range {
  uint32_t first = 0;                ///< the range's first shard
  uint32_t last = 0;                 ///< its last shard (inclusive)
  uint32_t group = 0;                ///< the group holding it
  std::optional<uint32_t> moving_to; ///< it is being moved to this group

  uint32_t size() const { return last - first + 1; }
};

class group_map {
public:
  /// Every shard in group 0: an installation that declares no other group.
  static group_map single(uint32_t shard_count);

  /// The map of `groups` and `ranges` (any order) over `shard_count` shards, or what is wrong
  /// with it, in words saying what to fix: the ranges cover every shard exactly once, each
  /// names a group of the map (and a move target another one), ids and names are unique, and
  /// every group but 0 has a DSN.
  static std::variant<group_map, std::string> make(std::vector<shard_group> groups,
                                                   std::vector<shard_range> ranges,
                                                   uint32_t shard_count, uint64_t version);

  /// The range holding `shard` (which must be below `shard_count()`).
  const shard_range& range_of(uint32_t shard) const;
  /// The group holding `shard`.
  const shard_group& group_of(uint32_t shard) const { return *find(range_of(shard).group); }
  /// The group with this id, or null.
  const shard_group* find(uint32_t id) const;
  /// The shards the group holds, in order.
  std::vector<uint32_t> shards_of(uint32_t group) const;

  /// The first range not held by `group` alone (held by another, or moving), or null.
  const shard_range* first_outside(uint32_t group) const;

  /// By id.
  const std::vector<shard_group>& groups() const { return groups_; }
  /// By first shard.
  const std::vector<shard_range>& ranges() const { return ranges_; }
  uint32_t shard_count() const { return shard_count_; }
  uint64_t version() const { return version_; }
  bool single_group() const { return groups_.size() == 1; }

private:
  group_map() = default;

  std::vector<shard_group> groups_;
  std::vector<shard_range> ranges_;
  uint32_t shard_count_ = 0;
  uint64_t version_ = 0;
};

/// The channel a change of the map is notified on (in the catalog database).
constexpr const char* groups_channel = "gost_groups";

/// The map as the catalog database holds it (tables shard_groups, shard_ranges, shard_map;
/// migration 0023): with no range declared, group 0 holds every shard. A map the tables make
/// invalid is an error (`db_errc::schema_mismatch`) with the map's message.
caf::expected<group_map> load_group_map(pg_pool& catalog, uint32_t shard_count);

/// The map's version as the catalog holds it now (one cheap read: a node compares it with
/// the map it serves at every heartbeat).
caf::expected<uint64_t> group_map_version(pg_pool& catalog);

/// The ids a group's database gives the rows the console lists across groups (dead letters,
/// the outbox's batches and so its parked rows) and the feed loads' ids (`feed_load_ids`, the
/// exchange's task ids) start at `group_id_base(group)`: ids are unique across the groups, so
/// a verb by id needs no group, and the groups' pages merge by id with one position (group 0
/// keeps its ids from 1; 2^15 groups at most).
constexpr int64_t group_id_base(uint32_t group) {
  return static_cast<int64_t>(group) << 48;
}

/// Moves the sequences of those ids in group `group`'s database up to its base, when they
/// are below (rows given ids before stay as they are). Idempotent; a node runs it for every
/// group at its start, before any writer.
caf::error reserve_group_ids(pg_pool& pool, uint32_t group);

/// Declares a group (a database, holding no range until one is moved to it) and answers its
/// id, the lowest free one; the map's version grows and `groups_channel` is notified. A name
/// or DSN already declared is `db_errc::already_exists`; an empty one `invalid_argument`.
caf::expected<uint32_t> add_group(pg_pool& catalog, const std::string& name,
                                  const std::string& dsn);

/// What declare_group did.
struct declared_group {
  uint32_t id = 0;
  int migrations_applied = 0;        ///< on the group's database
  bool installation_created = false; ///< it had no `installation` row: given the shard count
};

/// Declares the group `name` on the database `dsn` (`gostctl group add`): refuses a name or
/// DSN the catalog declares already (`already_exists`) and an empty one (`invalid_argument`);
/// then, before the catalog's row is written, connects to the database (`unavailable` with
/// libpq's reason when it cannot within `connect_timeout`), applies the migrations there
/// (`migrate`) and claims its `installation` row for `shard_count`, the catalog's: a database
/// already holding another shard count is `schema_mismatch`. Then `add_group`. Every message
/// masks the DSN's password.
caf::expected<declared_group> declare_group(pg_pool& catalog, const std::string& name,
                                            const std::string& dsn, uint32_t shard_count,
                                            std::chrono::milliseconds connect_timeout);

} // namespace gost::persistence
