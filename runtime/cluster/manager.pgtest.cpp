#include <doctest/doctest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/scoped_actor.hpp>
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
  /// Node n1's cluster manager on this database, joined: heartbeats every 50 ms, one move at a
  /// time, the lease and drain timeouts given.
  runtime::manager_actor join(caf::actor_system& sys, std::shared_ptr<runtime::router> routes,
                              std::chrono::milliseconds lease_timeout,
                              std::chrono::milliseconds drain_timeout) {
    runtime::cluster_options co;
    co.cfg.heartbeat = 50ms;
    co.cfg.lease_timeout = lease_timeout;
    co.cfg.max_moves = 1;
    co.cfg.drain_timeout = drain_timeout;
    co.node_id = "n1";
    co.shard_count = 4;
    co.pool = &pool;
    co.routes = std::move(routes);
    auto manager = runtime::spawn_cluster_manager(sys, co);
    caf::anon_send(manager, runtime::join_atom_v);
    return manager;
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
  auto manager = c.join(sys, routes, 5s, 1s);
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
  // Confirmed for 1950 ms after a heartbeat starts: a loaded machine (a build beside the
  // tests) delayed a heartbeat past the 950 ms a 1 s timeout gave.
  auto manager = c.join(sys, routes, 2s, 1s);
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

namespace {

/// A stand-in for a kit shard that drains slowly: it records the shard asked to drain, ignores
/// the manager's exit (a shard still finishing its work) and answers the drain only once `gate`
/// opens, then quits.
struct slow_drain {
  std::shared_ptr<std::atomic<int>> live = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<std::atomic<int>> asked = std::make_shared<std::atomic<int>>(-1); ///< shard
  std::shared_ptr<std::atomic<int>> draining = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<std::atomic<int>> answered = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<std::atomic<bool>> gate = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<std::mutex> mtx = std::make_shared<std::mutex>();
  std::shared_ptr<std::vector<caf::actor>> all = std::make_shared<std::vector<caf::actor>>();
};

caf::behavior slow_draining_shard(caf::event_based_actor* self, slow_drain s, uint32_t shard) {
  ++*s.live;
  self->attach_functor([live = s.live] { --*live; });
  auto exiting = std::make_shared<bool>(false);
  // Told to stop while the gate is shut: still finishing its work, it quits once it opens.
  self->set_exit_handler([exiting](caf::exit_msg&) { *exiting = true; });
  auto pending = std::make_shared<std::vector<caf::response_promise>>();
  self->delayed_send(self, 20ms, int32_t{1});
  return {
    [=](int32_t) {
      if (s.gate->load() && (*exiting || !pending->empty())) {
        for (auto& rp : *pending)
          rp.deliver(ok_atom_v);
        if (!pending->empty())
          ++*s.answered;
        self->quit();
        return;
      }
      self->delayed_send(self, 20ms, int32_t{1});
    },
    [=](drain_atom) {
      int none = -1;
      s.asked->compare_exchange_strong(none, static_cast<int>(shard));
      if (pending->empty())
        ++*s.draining;
      pending->push_back(self->make_response_promise());
      return pending->back();
    },
  };
}

} // namespace

TEST_CASE("cluster manager: a drain answered after its lease was taken over, and the shard taken "
          "again, neither releases the new lease nor forgets its shard (the stop does not hang)") {
  cluster_db c{2};
  auto& db = c.db;
  caf::actor_system_config cfg;
  register_core_types(cfg);
  caf::actor_system sys{cfg};
  slow_drain s;
  auto routes = std::make_shared<runtime::router>(4, std::vector<caf::actor>{});
  routes->kinds().add<offer_owner_ops>(runtime::make_shard_kind<offer_owner_ops>(
    "test",
    [s](const runtime::shard_lease& l) {
      auto a = l.sys->spawn(slow_draining_shard, s, l.shard);
      std::lock_guard<std::mutex> guard{*s.mtx};
      s.all->push_back(a);
      return a;
    },
    [](const std::string&) { return true; }));
  auto manager = c.join(sys, routes, 5s, 30s); // the drain ends when the test says
  REQUIRE(testing::eventually(10s, [&] { return routes->local_shards().size() == 4; }));

  // A second live node: n1 hands a shard off; its shard drains slowly.
  c.add_node("n2");
  db.scalar("UPDATE nodes SET heartbeat_at = now() + interval '1 hour' WHERE node_id = 'n2'");
  REQUIRE(testing::eventually(10s, [&] { return s.asked->load() >= 0; }));
  auto shard = std::to_string(s.asked->load());
  // Meanwhile another node takes that lease over (n1 drops the entry), then n2 is gone and the
  // lease free: n1 takes the shard again at a newer epoch, with a new shard actor.
  db.scalar("UPDATE shard_leases SET owner = 'x', epoch = epoch + 1, heartbeat_at = now() + "
            "interval '1 hour' WHERE shard = "
            + shard);
  REQUIRE(testing::eventually(10s, [&] { return !routes->here(std::stoul(shard)); }));
  db.scalar("UPDATE nodes SET heartbeat_at = now() - interval '1 hour' WHERE node_id = 'n2'");
  db.scalar("UPDATE shard_leases SET heartbeat_at = now() - interval '1 hour' WHERE shard = "
            + shard);
  REQUIRE(testing::eventually(10s, [&] {
    return db.scalar("SELECT owner FROM shard_leases WHERE shard = " + shard) == "n1"
           && routes->here(std::stoul(shard));
  }));
  auto taken_again = db.scalar("SELECT epoch FROM shard_leases WHERE shard = " + shard);
  // The old drains answer now. A join asked after that reaches the manager after the answers.
  s.gate->store(true);
  REQUIRE(testing::eventually(10s, [&] { return s.answered->load() == s.draining->load(); }));
  {
    caf::scoped_actor self{sys};
    self->request(manager, 10s, runtime::join_atom_v).receive([](ok_atom) {}, [](caf::error&) {});
  }
  // The new lease is still n1's, at its epoch, and its shard is served here.
  CHECK(
    db.scalar("SELECT coalesce(owner, '') || ' ' || epoch FROM shard_leases WHERE shard = " + shard)
    == "n1 " + taken_again);
  CHECK(routes->here(std::stoul(shard)));
  caf::anon_send_exit(manager, caf::exit_reason::user_shutdown);
  manager = runtime::manager_actor{};
  // Every shard actor stops with the manager (the slow ones answer their drains and quit).
  CHECK_MESSAGE(testing::eventually(10s, [&] { return s.live->load() == 0; }),
                s.live->load() << " shard actors still running after the manager stopped");
  // (Any left would hold the actor system's stop: killed, the test ends either way.)
  std::lock_guard<std::mutex> guard{*s.mtx};
  for (auto& a : *s.all)
    caf::anon_send_exit(a, caf::exit_reason::kill);
}
