#include <doctest/doctest.h>

#include <pqxx/pqxx>

#include "gost/persistence/cluster/groups.hpp"
#include "gost/persistence/errors.hpp"
#include "pg_fixture.hpp"

using namespace gost::persistence;

namespace {

/// Counts the notices on `groups_channel` its connection took in.
struct group_notices final : pqxx::notification_receiver {
  explicit group_notices(pqxx::connection& c) : pqxx::notification_receiver(c, groups_channel) {}
  void operator()(const std::string&, int) override { ++heard; }
  int heard = 0;
};

} // namespace

TEST_CASE("shard groups: a fresh catalog is group 0 holding every shard, at version 1") {
  migrated_db m;
  auto map = load_group_map(m.pool, 16);
  REQUIRE(map);
  CHECK(map->single_group());
  CHECK(map->version() == 1);
  CHECK(map->group_of(15).id == 0);
  CHECK(map->group_of(15).name == "main");
  CHECK(map->group_of(15).dsn.empty());
}

TEST_CASE("shard groups: a declared group is notified, grows the version and gets the lowest "
          "free id; names and DSNs are unique") {
  migrated_db m;
  pqxx::connection listener{m.db.dsn()};
  group_notices notices{listener};

  auto east = add_group(m.pool, "east", "host=127.0.0.1 dbname=east");
  REQUIRE(east);
  CHECK(*east == 1);
  // The notice was sent in the same transaction: it is there once the call returned.
  listener.await_notification(30, 0);
  CHECK(notices.heard == 1);

  auto map = load_group_map(m.pool, 16);
  REQUIRE(map);
  CHECK(map->version() == 2);
  REQUIRE(map->find(1) != nullptr);
  CHECK(map->find(1)->name == "east");
  CHECK(map->shards_of(1).empty()); // no range moved to it yet
  CHECK(map->group_of(3).id == 0);

  auto again = add_group(m.pool, "east", "host=elsewhere");
  REQUIRE_FALSE(again);
  CHECK(again.error() == db_errc::already_exists);
  CHECK(error_message(again.error()) == "a group named `east` exists");
  auto same_db = add_group(m.pool, "west", "host=127.0.0.1 dbname=east");
  REQUIRE_FALSE(same_db);
  CHECK(error_message(same_db.error()) == "group `east` has this connection string");
  auto no_dsn = add_group(m.pool, "west", "");
  REQUIRE_FALSE(no_dsn);
  CHECK(no_dsn.error() == db_errc::invalid_argument);

  auto west = add_group(m.pool, "west", "host=127.0.0.1 dbname=west");
  REQUIRE(west);
  CHECK(*west == 2);
  CHECK(load_group_map(m.pool, 16)->version() == 3);
}

TEST_CASE("shard groups: declared ranges place shards; a map the tables make invalid is refused "
          "with what is wrong") {
  migrated_db m;
  REQUIRE(add_group(m.pool, "east", "host=127.0.0.1 dbname=east"));
  {
    pqxx::connection c{m.db.dsn()};
    pqxx::work tx{c};
    tx.exec("INSERT INTO shard_ranges (first_shard, last_shard, group_id) VALUES (0, 7, 0),"
            " (8, 15, 1)");
    tx.commit();
  }
  auto map = load_group_map(m.pool, 16);
  REQUIRE(map);
  CHECK(map->group_of(7).id == 0);
  CHECK(map->group_of(8).name == "east");

  // Ranges that leave shards out (here: the installation has 20) are not a map.
  auto bad = load_group_map(m.pool, 20);
  REQUIRE_FALSE(bad);
  CHECK(bad.error() == db_errc::schema_mismatch);
  CHECK(error_message(bad.error())
        == "the shard group map (catalog tables shard_groups, shard_ranges) is invalid: no range "
           "holds shards 16-19: every shard needs a group");
}
