#include "gost/persistence/cluster/groups.hpp"

#include <algorithm>
#include <set>

#include "gost/persistence/conninfo.hpp"
#include "gost/persistence/errors.hpp"
#include "gost/persistence/pg_pool.hpp"
#include "gost/persistence/schema.hpp"
#include "pg_internal.hpp"

namespace gost::persistence {

namespace {

std::string shards(uint32_t first, uint32_t last) {
  return first == last ? "shard " + std::to_string(first)
                       : "shards " + std::to_string(first) + "-" + std::to_string(last);
}

std::string group_name(uint32_t id) {
  return "group " + std::to_string(id);
}

} // namespace

group_map group_map::single(uint32_t shard_count) {
  group_map m;
  m.groups_.push_back({0, "main", {}});
  m.ranges_.push_back({0, shard_count - 1, 0, std::nullopt});
  m.shard_count_ = shard_count;
  return m;
}

std::variant<group_map, std::string> group_map::make(std::vector<shard_group> groups,
                                                     std::vector<shard_range> ranges,
                                                     uint32_t shard_count, uint64_t version) {
  if (shard_count == 0)
    return std::string{"the installation has no shards"};
  std::sort(groups.begin(), groups.end(), [](auto& a, auto& b) { return a.id < b.id; });
  std::set<std::string> names;
  for (size_t i = 0; i < groups.size(); ++i) {
    auto& g = groups[i];
    if (i > 0 && groups[i - 1].id == g.id)
      return group_name(g.id) + " is declared twice: give each group one row";
    if (g.name.empty())
      return group_name(g.id) + " has no name: name it (logs and gostctl show it)";
    if (!names.insert(g.name).second)
      return "two groups are named `" + g.name + "`: names must be unique";
    if (g.id == 0 && !g.dsn.empty())
      return "group 0 is the catalog database (pg.dsn): leave its dsn empty";
    if (g.id != 0 && g.dsn.empty())
      return group_name(g.id) + " (`" + g.name
             + "`) has no dsn: give its database's connection string";
  }
  auto known = [&](uint32_t id) {
    return std::binary_search(groups.begin(), groups.end(), shard_group{id, {}, {}},
                              [](auto& a, auto& b) { return a.id < b.id; });
  };
  std::sort(ranges.begin(), ranges.end(), [](auto& a, auto& b) { return a.first < b.first; });
  uint32_t next = 0; // the first shard no range covered yet
  for (auto& r : ranges) {
    if (r.last < r.first)
      return "the range " + std::to_string(r.first) + "-" + std::to_string(r.last)
             + " ends before it starts: give first <= last";
    if (r.first < next)
      return "two ranges hold " + shards(r.first, std::min(r.last, next - 1))
             + ": each shard belongs to one range";
    if (r.first > next)
      return "no range holds " + shards(next, r.first - 1) + ": every shard needs a group";
    if (r.last >= shard_count)
      return "the range " + shards(r.first, r.last) + " goes past the installation's "
             + std::to_string(shard_count) + " shards (0-" + std::to_string(shard_count - 1) + ")";
    if (!known(r.group))
      return "the range " + shards(r.first, r.last) + " names " + group_name(r.group)
             + ", which is not declared: add the group first";
    if (r.moving_to && (*r.moving_to == r.group || !known(*r.moving_to)))
      return "the range " + shards(r.first, r.last) + " moves to " + group_name(*r.moving_to)
             + ": a move needs another declared group";
    next = r.last + 1;
  }
  if (next < shard_count)
    return "no range holds " + shards(next, shard_count - 1) + ": every shard needs a group";
  group_map m;
  m.groups_ = std::move(groups);
  m.ranges_ = std::move(ranges);
  m.shard_count_ = shard_count;
  m.version_ = version;
  return m;
}

const shard_range& group_map::range_of(uint32_t shard) const {
  // The last range starting at or before the shard (ranges cover 0..shard_count-1).
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), shard,
                             [](uint32_t s, const shard_range& r) { return s < r.first; });
  return *std::prev(it);
}

const shard_group* group_map::find(uint32_t id) const {
  auto it = std::lower_bound(groups_.begin(), groups_.end(), id,
                             [](const shard_group& g, uint32_t v) { return g.id < v; });
  return it != groups_.end() && it->id == id ? &*it : nullptr;
}

const shard_range* group_map::first_outside(uint32_t group) const {
  for (auto& r : ranges_)
    if (r.group != group || r.moving_to)
      return &r;
  return nullptr;
}

std::vector<uint32_t> group_map::shards_of(uint32_t group) const {
  std::vector<uint32_t> out;
  for (auto& r : ranges_)
    if (r.group == group)
      for (auto s = r.first; s <= r.last; ++s)
        out.push_back(s);
  return out;
}

caf::expected<group_map> load_group_map(pg_pool& catalog, uint32_t shard_count) {
  std::vector<shard_group> groups;
  std::vector<shard_range> ranges;
  uint64_t version = 0;
  auto err = with_connection(catalog, [&](pqxx::connection& c) {
    groups.clear();
    ranges.clear();
    // One snapshot: a change between the three reads would make a map that never was.
    pqxx::work tx{c};
    tx.exec("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY");
    version = tx.exec1("SELECT version FROM shard_map")[0].as<uint64_t>();
    for (auto row : tx.exec("SELECT id, name, dsn FROM shard_groups ORDER BY id"))
      groups.push_back({row[0].as<uint32_t>(), row[1].as<std::string>(), row[2].as<std::string>()});
    for (auto row :
         tx.exec("SELECT first_shard, last_shard, group_id, moving_to FROM shard_ranges"))
      ranges.push_back(
        {row[0].as<uint32_t>(), row[1].as<uint32_t>(), row[2].as<uint32_t>(),
         row[3].is_null() ? std::nullopt : std::optional<uint32_t>{row[3].as<uint32_t>()}});
    tx.commit();
  });
  if (err)
    return err;
  if (ranges.empty()) // no range declared: group 0 holds every shard
    ranges.push_back({0, shard_count - 1, 0, std::nullopt});
  auto m = group_map::make(std::move(groups), std::move(ranges), shard_count, version);
  if (auto* e = std::get_if<std::string>(&m))
    return make_db_error(db_errc::schema_mismatch, "the shard group map (catalog tables "
                                                   "shard_groups, shard_ranges) is invalid: "
                                                     + *e);
  return std::get<group_map>(std::move(m));
}

caf::expected<uint64_t> group_map_version(pg_pool& catalog) {
  uint64_t version = 0;
  auto err = with_connection(catalog, [&](pqxx::connection& c) {
    pqxx::nontransaction tx{c};
    version = tx.exec("SELECT version FROM shard_map")[0][0].as<uint64_t>();
  });
  if (err)
    return err;
  return version;
}

caf::error reserve_group_ids(pg_pool& pool, uint32_t group) {
  if (group == 0)
    return {};
  return with_connection(pool, [&](pqxx::connection& c) {
    pqxx::nontransaction tx{c};
    for (const char* seq : {"pg_get_serial_sequence('dead_letters', 'id')",
                            "pg_get_serial_sequence('outbox_batches', 'id')", "'feed_load_ids'"})
      tx.exec_params(std::string("SELECT setval(s, $1::bigint) FROM (SELECT ") + seq
                       + "::regclass AS s) q WHERE coalesce(pg_sequence_last_value(s), 0) < "
                         "$1::bigint",
                     group_id_base(group));
  });
}

caf::expected<uint32_t> add_group(pg_pool& catalog, const std::string& name,
                                  const std::string& dsn) {
  if (name.empty())
    return make_db_error(db_errc::invalid_argument, "a group needs a name");
  if (dsn.empty())
    return make_db_error(db_errc::invalid_argument,
                         "group `" + name + "` needs the connection string of its database");
  uint32_t id = 0;
  std::string taken;
  auto err = with_connection(catalog, [&](pqxx::connection& c) {
    taken.clear();
    pqxx::work tx{c};
    // The map's row is the lock: changes of the map take turns.
    tx.exec("SELECT version FROM shard_map FOR UPDATE");
    auto same =
      tx.exec_params("SELECT name FROM shard_groups WHERE name = $1 OR dsn = $2", name, dsn);
    if (!same.empty()) {
      taken = same[0][0].as<std::string>();
      return;
    }
    id = tx.exec1("SELECT min(g.id + 1) FROM shard_groups g WHERE NOT EXISTS"
                  " (SELECT 1 FROM shard_groups n WHERE n.id = g.id + 1)")[0]
           .as<uint32_t>();
    tx.exec_params("INSERT INTO shard_groups (id, name, dsn) VALUES ($1, $2, $3)", id, name, dsn);
    tx.exec("UPDATE shard_map SET version = version + 1");
    tx.exec(std::string{"NOTIFY "} + groups_channel);
    tx.commit();
  });
  if (err)
    return err;
  if (!taken.empty())
    return make_db_error(db_errc::already_exists,
                         taken == name ? "a group named `" + name + "` exists"
                                       : "group `" + taken + "` has this connection string");
  return id;
}

caf::expected<declared_group> declare_group(pg_pool& catalog, const std::string& name,
                                            const std::string& dsn, uint32_t shard_count,
                                            std::chrono::milliseconds connect_timeout) {
  auto masked = [&](const std::string& text) { return masked_password(text, dsn); };
  if (name.empty())
    return make_db_error(db_errc::invalid_argument, "a group needs a name");
  if (dsn.empty())
    return make_db_error(db_errc::invalid_argument,
                         "group `" + name + "` needs the connection string of its database");
  // Refused before the database is touched (add_group checks again, under the map's lock).
  auto map = load_group_map(catalog, shard_count);
  if (!map)
    return map.error();
  for (auto& g : map->groups()) {
    if (g.name == name)
      return make_db_error(db_errc::already_exists, "a group named `" + name + "` exists");
    if (g.dsn == dsn)
      return make_db_error(db_errc::already_exists,
                           "group `" + g.name + "` has this connection string");
  }
  auto seconds = std::max<int64_t>(1, (connect_timeout.count() + 999) / 1000);
  pg_pool::options o;
  o.dsn = with_conninfo_defaults(dsn, {{"connect_timeout", std::to_string(seconds)}});
  o.size = 1;
  o.acquire_timeout = connect_timeout;
  pg_pool pool{std::move(o)};
  auto where = "group `" + name + "`'s database (" + masked(dsn) + ")";
  if (auto err = pool.ping())
    return make_db_error(db_errc::unavailable, "cannot reach " + where + ": "
                                                 + masked(error_message(err))
                                                 + "; start its server or fix the DSN");
  declared_group out;
  auto applied = migrate(pool);
  if (!applied)
    return make_db_error(static_cast<db_errc>(applied.error().code()),
                         "cannot migrate " + where + ": " + masked(error_message(applied.error())));
  out.migrations_applied = *applied;
  auto stored = claim_installation(pool, shard_count, &out.installation_created);
  if (!stored)
    return make_db_error(static_cast<db_errc>(stored.error().code()),
                         "cannot read the installation of " + where + ": "
                           + masked(error_message(stored.error())));
  if (*stored != shard_count)
    return make_db_error(db_errc::schema_mismatch,
                         where + " belongs to an installation of " + std::to_string(*stored)
                           + " shards, this one has " + std::to_string(shard_count)
                           + ": give a database of this installation or an empty one");
  auto id = add_group(catalog, name, dsn);
  if (!id)
    return id.error();
  out.id = *id;
  return out;
}

} // namespace gost::persistence
