#include <doctest/doctest.h>

#include "gost/persistence/cluster/leases.hpp"
#include "gost/persistence/pg_pool.hpp"
#include "gost/persistence/schema.hpp"
#include "gost/testing/pg.hpp"
#include "pg_fixture.hpp"

using namespace gost::persistence;
using namespace std::chrono_literals;

namespace {

struct fixture : migrated_db {
  fixture() { REQUIRE_FALSE(ensure_lease_rows(pool, 4)); }
  held_lease take(const std::string& node) {
    auto r = acquire_free_lease(pool, node, 5s);
    REQUIRE(r);
    REQUIRE(*r);
    return **r;
  }
};

} // namespace

TEST_CASE_FIXTURE(fixture, "a node takes the free lease processed longest ago, at a new epoch") {
  db.scalar(
    "UPDATE shard_leases SET last_processing_start = now() - (shard || ' minutes')::interval");
  auto first = take("n1"); // shard 3 was processed longest ago
  CHECK(first.shard == 3);
  CHECK(first.epoch == 1);
  auto second = take("n2");
  CHECK(second.shard == 2);
  // A held lease is not free: the two remaining go, then nothing.
  take("n1");
  take("n2");
  auto none = acquire_free_lease(pool, "n3", 5s);
  REQUIRE(none);
  CHECK_FALSE(*none);
}

TEST_CASE_FIXTURE(fixture,
                  "an expired lease is taken over; the old owner's heartbeat no longer renews it") {
  auto a = take("n1");
  auto renewed = heartbeat(pool, "n1", {a});
  REQUIRE(renewed);
  CHECK(renewed->size() == 1);
  // n1 stops heartbeating (a pause): its lease expires and n2 takes it at epoch + 1.
  db.scalar("UPDATE shard_leases SET heartbeat_at = now() - interval '1 hour' WHERE shard = "
            + std::to_string(a.shard));
  db.scalar("UPDATE shard_leases SET owner = 'x', heartbeat_at = now() WHERE shard <> "
            + std::to_string(a.shard));
  auto b = take("n2");
  CHECK(b.shard == a.shard);
  CHECK(b.epoch == a.epoch + 1);
  auto lost = heartbeat(pool, "n1", {a});
  REQUIRE(lost);
  CHECK(lost->empty());
}

TEST_CASE_FIXTURE(fixture, "a released lease goes first to the node it was handed to") {
  std::vector<held_lease> mine;
  for (int i = 0; i < 4; ++i)
    mine.push_back(take("n1"));
  // n1 hands its most recently taken shard to n3; another node asking first does not get it
  // while older free shards exist, n3 does.
  auto moving = mine.back();
  REQUIRE_FALSE(mark_handoff(pool, "n1", moving, "n3"));
  auto shards = list_leases(pool, 5s);
  REQUIRE(shards);
  CHECK(shards->at(moving.shard).handoff_to == "n3");
  REQUIRE_FALSE(release_lease(pool, "n1", mine.front()));
  REQUIRE_FALSE(release_lease(pool, "n1", moving));
  auto got = take("n3");
  CHECK(got.shard == moving.shard);
  CHECK(got.epoch == moving.epoch + 1);
  // Releasing at a stale epoch does nothing.
  REQUIRE_FALSE(release_lease(pool, "n1", moving));
  CHECK(db.scalar("SELECT owner FROM shard_leases WHERE shard = " + std::to_string(moving.shard))
        == "n3");
}

TEST_CASE_FIXTURE(fixture, "members are alive while they heartbeat and until they leave") {
  node_row n;
  n.node_id = "n1";
  n.caf_host = "127.0.0.1";
  n.caf_port = 4242;
  n.grpc_addr = "127.0.0.1:1";
  n.http_addr = "127.0.0.1:2";
  REQUIRE_FALSE(register_node(pool, n));
  n.node_id = "n2";
  REQUIRE_FALSE(register_node(pool, n));
  db.scalar("UPDATE nodes SET heartbeat_at = now() - interval '1 hour' WHERE node_id = 'n2'");
  auto nodes = list_nodes(pool, 5s);
  REQUIRE(nodes);
  REQUIRE(nodes->size() == 2);
  CHECK(nodes->at(0).alive);
  CHECK(nodes->at(0).caf_port == 4242);
  CHECK_FALSE(nodes->at(1).alive);
  REQUIRE_FALSE(set_leaving(pool, "n1"));
  nodes = list_nodes(pool, 5s);
  REQUIRE(nodes);
  CHECK_FALSE(nodes->at(0).alive);
  CHECK(nodes->at(0).leaving);
  // A restart registers it again, alive.
  n.node_id = "n1";
  REQUIRE_FALSE(register_node(pool, n));
  nodes = list_nodes(pool, 5s);
  REQUIRE(nodes);
  CHECK(nodes->at(0).alive);
}
