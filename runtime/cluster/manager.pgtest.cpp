#include <doctest/doctest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/send.hpp>

#include "cluster/manager.hpp"
#include "gost/core/protocol.hpp"
#include "gost/offers/protocol.hpp"
#include "gost/persistence/cluster/leases.hpp"
#include "gost/persistence/offers/write_behind.hpp"
#include "gost/persistence/pg_pool.hpp"
#include "gost/persistence/schema.hpp"
#include "gost/testing/held_locks.hpp"
#include "gost/testing/migrated_db.hpp"
#include "gost/testing/pg.hpp"
#include "gost/testing/process.hpp"

using namespace std::chrono_literals;
using namespace gost;

namespace {

/// A stand-in for a kit shard: keeps itself alive with a chain of delayed messages (as a
/// shard's polls do) until an exit message stops it; counts the ones running.
caf::behavior polling_shard(caf::event_based_actor* self, std::shared_ptr<std::atomic<int>> live) {
  ++*live;
  self->attach_functor([live] { --*live; });
  self->delayed_send(self, 20ms, int32_t{1});
  return {[=](int32_t) { self->delayed_send(self, 20ms, int32_t{1}); }};
}

/// A migrated database with four shard leases and node n1 registered; its pool has
/// `pool_size` connections.
struct cluster_db : testing::migrated_db {
  explicit cluster_db(int pool_size) : migrated_db{pool_size} {
    REQUIRE_FALSE(persistence::ensure_lease_rows(pool, 4));
    add_node("n1");
  }
  void add_node(const std::string& id) {
    persistence::node_row n;
    n.node_id = id;
    n.caf_host = "127.0.0.1";
    n.caf_port = 1;
    REQUIRE_FALSE(persistence::register_node(pool, n));
  }
};

} // namespace

TEST_CASE("cluster manager: a lease it takes again at a new epoch stops the shard it still ran, "
          "so no shard outlives the manager (the node's stop does not hang)") {
  cluster_db c{2};
  auto& db = c.db;
  auto& pool = c.pool;
  // n1's liveness lock looks lost (taken once, free now: gone_nodes), so every lease it owns
  // is free for anyone, n1 included: what a node sees between losing its liveness session and
  // taking the lock again.
  db.scalar("UPDATE nodes SET locked_since = now() WHERE node_id = 'n1'");

  caf::actor_system_config cfg;
  register_core_types(cfg);
  caf::actor_system sys{cfg};
  auto live = std::make_shared<std::atomic<int>>(0);
  auto spawned = std::make_shared<std::atomic<int>>(0);
  auto routes = std::make_shared<runtime::router>(4, std::vector<caf::actor>{});
  routes->kinds().add<offer_owner_ops>(runtime::make_shard_kind<offer_owner_ops>(
    "test",
    [live, spawned](const runtime::shard_lease& l) {
      ++*spawned;
      return l.sys->spawn(polling_shard, live);
    },
    [](const std::string&) { return true; }));
  runtime::cluster_options co;
  co.cfg.heartbeat = 50ms;
  co.cfg.lease_timeout = 5s;
  co.cfg.max_moves = 1;
  co.cfg.drain_timeout = 1s;
  co.node_id = "n1";
  co.shard_count = 4;
  co.pool = &pool;
  co.routes = routes;
  auto manager = runtime::spawn_cluster_manager(sys, co);
  caf::anon_send(manager, runtime::join_atom_v);
  REQUIRE(testing::eventually(10s, [&] { return routes->local_shards().size() == 4; }));
  REQUIRE(testing::eventually(5s, [&] { return live->load() == 4; }));
  // Another node takes shard 3: n1 drops it and, below its share, takes a free lease again:
  // one of its own (free, as n1 looks gone) at a new epoch, whose old shard must stop.
  db.scalar("UPDATE shard_leases SET owner = 'x', epoch = epoch + 1, heartbeat_at = now() + "
            "interval '1 hour' WHERE shard = 3");
  REQUIRE(testing::eventually(10s, [&] { return spawned->load() >= 5; }));
  CHECK(db.scalar("SELECT max(epoch) FROM shard_leases WHERE owner = 'n1'") != "1");
  caf::anon_send_exit(manager, caf::exit_reason::user_shutdown);
  manager = runtime::manager_actor{};
  // The manager's stop takes every shard it ran along: nothing left polling (before the fix,
  // the replaced ones were: 81 of them here, and the actor system's stop waited forever).
  CHECK_MESSAGE(testing::eventually(10s, [&] { return live->load() == 0; }),
                live->load() << " shard actors still running after the manager stopped");
}

TEST_CASE("cluster manager: its heartbeat renews the leases while every connection of the node's "
          "pool is busy (it has a connection of its own), so the leases stay confirmed") {
  // The node's pool, one connection (the writers, stores and API calls share it).
  cluster_db c{1};
  auto& db = c.db;
  auto& pool = c.pool;
  // Another live node owns shards 2 and 3: n1 is not alone, so its shards are served only while
  // a heartbeat confirmed their leases (lease_confirmation::set_alone).
  c.add_node("n2");
  db.scalar("UPDATE nodes SET heartbeat_at = now() + interval '1 hour' WHERE node_id = 'n2'");
  db.scalar("UPDATE shard_leases SET owner = 'n2', epoch = 1, heartbeat_at = now() + "
            "interval '1 hour' WHERE shard IN (2, 3)");

  caf::actor_system_config cfg;
  register_core_types(cfg);
  caf::actor_system sys{cfg};
  auto live = std::make_shared<std::atomic<int>>(0);
  auto routes = std::make_shared<runtime::router>(4, std::vector<caf::actor>{});
  routes->kinds().add<offer_owner_ops>(runtime::make_shard_kind<offer_owner_ops>(
    "test", [live](const runtime::shard_lease& l) { return l.sys->spawn(polling_shard, live); },
    [](const std::string&) { return true; }));
  runtime::cluster_options co;
  co.cfg.heartbeat = 50ms;
  // Confirmed for 1950 ms after a heartbeat starts: a loaded machine (a build beside the
  // tests) delayed a heartbeat past the 950 ms a 1 s timeout gave.
  co.cfg.lease_timeout = 2s;
  co.cfg.max_moves = 1;
  co.cfg.drain_timeout = 1s;
  co.node_id = "n1";
  co.shard_count = 4;
  co.pool = &pool;
  co.routes = routes;
  auto manager = runtime::spawn_cluster_manager(sys, co);
  caf::anon_send(manager, runtime::join_atom_v);
  auto& confirmation = routes->confirmation();
  REQUIRE(testing::eventually(10s, [&] {
    return routes->local_shards().size() == 2 && !confirmation.alone()
           && confirmation.confirmed(std::chrono::steady_clock::now());
  }));

  // The pool's only connection waits 6 s on a table lock the test holds (as a writer's would on
  // a row lock, or behind a slow commit): three times the lease timeout.
  auto lock = testing::hold_locks(db, "LOCK TABLE offers IN ACCESS EXCLUSIVE MODE", 6s,
                                  "/tmp/gost-lock-" + std::to_string(getpid()));
  std::thread busy{[&] { (void)persistence::load_offers(pool, {"held"}); }};
  REQUIRE(testing::eventually(10s, [&] {
    return db.scalar("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                     " AND wait_event_type = 'Lock'")
           == "1";
  }));
  auto blocked_at = db.scalar("SELECT now()");

  // Its heartbeats go on: the leases are renewed more than 1.5 lease timeouts after the pool's
  // connection was taken, and they stayed confirmed all along (before the fix the heartbeat
  // waited for the pool: unconfirmed after one lease timeout, calls for n1's shards refused).
  bool lapsed = false;
  bool renewed = testing::eventually(10s, [&] {
    if (!confirmation.confirmed(std::chrono::steady_clock::now()))
      lapsed = true;
    return lapsed
           || db.scalar("SELECT count(*) FROM shard_leases WHERE owner = 'n1' AND heartbeat_at >"
                        " '"
                        + blocked_at + "'::timestamptz + interval '3000 ms'")
                == "2";
  });
  CHECK_FALSE_MESSAGE(lapsed, "the leases lapsed while the node's pool was busy");
  CHECK(renewed);
  // The lock was still held: the pool's connection was busy the whole time.
  CHECK(db.scalar("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                  " AND wait_event_type = 'Lock'")
        == "1");
  CHECK(confirmation.refusals() == 0);
  CHECK(lock->wait(10s) == 0);
  busy.join();
  caf::anon_send_exit(manager, caf::exit_reason::user_shutdown);
  manager = runtime::manager_actor{};
  CHECK(testing::eventually(10s, [&] { return live->load() == 0; }));
}
