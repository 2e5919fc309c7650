#include <doctest/doctest.h>

#include <pqxx/pqxx>

#include "gost/persistence/cluster/groups.hpp"
#include "gost/persistence/errors.hpp"
#include "gost/persistence/schema.hpp"
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

TEST_CASE("shard groups: a declared group's database is migrated and given the catalog's shard "
          "count before the catalog's row is written") {
  migrated_db catalog;
  gost::testing::temp_db east;
  // The test server trusts loopback: the password is not checked, only carried.
  auto dsn = east.dsn() + " password=s3cret";
  auto added = declare_group(catalog.pool, "east", dsn, 16, std::chrono::seconds{10});
  REQUIRE_MESSAGE(added, error_message(added.error()));
  CHECK(added->id == 1);
  CHECK(added->migrations_applied == static_cast<int>(builtin_migrations().size()));
  CHECK(added->installation_created);
  CHECK(east.scalar("SELECT shard_count FROM installation") == "16");
  CHECK(east.scalar("SELECT to_regclass('offers') IS NOT NULL") == "t");
  auto map = load_group_map(catalog.pool, 16);
  REQUIRE(map);
  CHECK(map->version() == 2);
  REQUIRE(map->find(1) != nullptr);
  CHECK(map->find(1)->dsn == dsn);

  // A database of this installation already (migrated, same count): nothing to apply.
  gost::testing::temp_db west;
  {
    pg_pool p{pool_options(west)};
    REQUIRE(migrate(p));
    REQUIRE_FALSE(ensure_installation(p, 16));
  }
  auto again = declare_group(catalog.pool, "west", west.dsn(), 16, std::chrono::seconds{10});
  REQUIRE_MESSAGE(again, error_message(again.error()));
  CHECK(again->id == 2);
  CHECK(again->migrations_applied == 0);
  CHECK_FALSE(again->installation_created);
}

TEST_CASE("shard groups: a group is refused, its row not written, when its database belongs to "
          "another shard count, cannot be reached, or its name or DSN is declared") {
  migrated_db catalog;
  gost::testing::temp_db other;
  {
    pg_pool p{pool_options(other)};
    REQUIRE(migrate(p));
    REQUIRE_FALSE(ensure_installation(p, 32));
  }
  auto other_dsn = other.dsn() + " password=s3cret";
  auto wide = declare_group(catalog.pool, "wide", other_dsn, 16, std::chrono::seconds{10});
  REQUIRE_FALSE(wide);
  CHECK(wide.error() == db_errc::schema_mismatch);
  auto msg = error_message(wide.error());
  CHECK(msg.find("belongs to an installation of 32 shards, this one has 16") != std::string::npos);
  CHECK(msg.find("password=***") != std::string::npos);
  CHECK(msg.find("s3cret") == std::string::npos);
  CHECK(other.scalar("SELECT shard_count FROM installation") == "32");

  // Nothing listens on port 1.
  auto gone = declare_group(catalog.pool, "gone",
                            "host=127.0.0.1 port=1 user=gost dbname=gone password=hunter2", 16,
                            std::chrono::seconds{2});
  REQUIRE_FALSE(gone);
  CHECK(gone.error() == db_errc::unavailable);
  msg = error_message(gone.error());
  CHECK_MESSAGE(msg.find("cannot reach group `gone`'s database (host=127.0.0.1 port=1 user=gost "
                         "dbname=gone password=***): ")
                  == 0,
                msg);
  CHECK_MESSAGE(msg.find("refused") != std::string::npos, msg); // libpq's reason
  CHECK(msg.find("hunter2") == std::string::npos);

  auto no_name = declare_group(catalog.pool, "", other_dsn, 16, std::chrono::seconds{2});
  REQUIRE_FALSE(no_name);
  CHECK(no_name.error() == db_errc::invalid_argument);

  // A name declared: refused before the new database is touched (it stays unmigrated).
  gost::testing::temp_db fresh;
  REQUIRE(add_group(catalog.pool, "east", "host=127.0.0.1 dbname=east"));
  auto taken = declare_group(catalog.pool, "east", fresh.dsn(), 16, std::chrono::seconds{10});
  REQUIRE_FALSE(taken);
  CHECK(taken.error() == db_errc::already_exists);
  CHECK(error_message(taken.error()) == "a group named `east` exists");
  CHECK(fresh.scalar("SELECT to_regclass('schema_migrations') IS NULL") == "t");
  auto same_db =
    declare_group(catalog.pool, "west", "host=127.0.0.1 dbname=east", 16, std::chrono::seconds{2});
  REQUIRE_FALSE(same_db);
  CHECK(error_message(same_db.error()) == "group `east` has this connection string");

  // Only `east` (added above) was declared.
  auto map = load_group_map(catalog.pool, 16);
  REQUIRE(map);
  CHECK(map->groups().size() == 2);
  CHECK(map->version() == 2);
}

TEST_CASE("shard groups: a group's dead letters, outbox batches and feed loads take ids from "
          "its own range; reserving again keeps the sequence where it is") {
  migrated_db zero;
  migrated_db two;
  auto letter = [](migrated_db& m) {
    return std::stoll(m.db.scalar("INSERT INTO dead_letters (shard, offer_id, stage_id, reason)"
                                  " VALUES (1, 'o', 's', 'r') RETURNING id"));
  };
  auto batch = [](migrated_db& m) {
    return std::stoll(m.db.scalar("INSERT INTO outbox_batches (shard, events, payload)"
                                  " VALUES (1, 1, '\\x00') RETURNING id"));
  };
  REQUIRE_FALSE(reserve_group_ids(zero.pool, 0));
  REQUIRE_FALSE(reserve_group_ids(two.pool, 2));
  CHECK(letter(zero) < group_id_base(1)); // group 0 keeps its ids from 1
  auto first = letter(two);
  CHECK(first > group_id_base(2));
  CHECK(first < group_id_base(3));
  CHECK(batch(two) > group_id_base(2));
  auto load = [](migrated_db& m) {
    return std::stoll(m.db.scalar("SELECT nextval('feed_load_ids')"));
  };
  CHECK(load(zero) < group_id_base(1));
  auto first_load = load(two);
  CHECK(first_load > group_id_base(2));
  CHECK(first_load < group_id_base(3));
  // At the next start: not set back.
  REQUIRE_FALSE(reserve_group_ids(two.pool, 2));
  CHECK(letter(two) == first + 1);
  CHECK(load(two) == first_load + 1);
}
