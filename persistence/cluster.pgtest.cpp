#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

#include <pqxx/pqxx>

#include "gost/persistence/cluster/leases.hpp"
#include "gost/persistence/pg_pool.hpp"
#include "gost/persistence/schema.hpp"
#include "gost/testing/pg.hpp"
#include "gost/testing/process.hpp"
#include "pg_fixture.hpp"
#include "pg_internal.hpp"
#include "sql.hpp"

using namespace gost::persistence;
using namespace std::chrono_literals;

namespace {

struct fixture : migrated_db {
  fixture() { REQUIRE_FALSE(ensure_lease_rows(pool, 4)); }
  held_lease take(const std::string& node) {
    auto r = acquire_free_lease(pool, node, 5s);
    REQUIRE(r);
    REQUIRE(r->lease);
    return *r->lease;
  }
  void add_node(const std::string& id) {
    node_row n;
    n.node_id = id;
    n.caf_host = "127.0.0.1";
    n.caf_port = 1;
    n.grpc_addr = "127.0.0.1:1";
    n.http_addr = "127.0.0.1:2";
    REQUIRE_FALSE(register_node(pool, n));
  }
  /// Waits (bounded) until `pred` holds.
  template <class Pred>
  bool eventually(Pred pred) {
    return gost::testing::eventually(5s, pred);
  }
  bool gone(const std::string& id) {
    auto nodes = list_nodes(pool, 5s);
    REQUIRE(nodes);
    for (auto& n : *nodes)
      if (n.node_id == id)
        return n.gone;
    return false;
  }
};

} // namespace

TEST_CASE_FIXTURE(fixture, "a shard group's manager takes the leases of its group's shards only, "
                           "though the database holds rows of others (ADR 0023)") {
  // Shards 0 and 1 were processed longest ago: taken first by a manager of every shard.
  db.scalar("UPDATE shard_leases SET last_processing_start = now() - ((4 - shard) || ' "
            "minutes')::interval");
  const std::vector<uint32_t> group{2, 3};
  std::set<uint32_t> taken;
  for (int i = 0; i < 2; ++i) {
    auto r = acquire_free_lease(pool, "n1", 5s, group);
    REQUIRE(r);
    REQUIRE(r->lease);
    taken.insert(r->lease->shard);
  }
  CHECK(taken == std::set<uint32_t>{2, 3});
  auto none = acquire_free_lease(pool, "n1", 5s, group); // 0 and 1 are free, not the group's
  REQUIRE(none);
  CHECK_FALSE(none->lease);
  CHECK(db.scalar("SELECT count(*) FROM shard_leases WHERE owner IS NULL") == "2");
  // A group's lease rows are created for its shards (the others' exist already here).
  REQUIRE_FALSE(ensure_lease_rows(pool, std::vector<uint32_t>{6, 7}));
  CHECK(db.scalar("SELECT string_agg(shard::text, ',' ORDER BY shard) FROM shard_leases")
        == "0,1,2,3,6,7");
}

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
  CHECK_FALSE(none->lease);
  CHECK(none->ended.empty());
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

TEST_CASE_FIXTURE(
  fixture,
  "a node whose process is gone loses its leases at once; restarted, it takes its own back") {
  add_node("n1");
  add_node("n2");
  std::optional<cluster_listener> n1_session;
  n1_session.emplace(
    db.dsn(), [] {}, "n1");
  REQUIRE(eventually([&] { return n1_session->holds_liveness_lock(); }));
  std::vector<held_lease> mine;
  for (int i = 0; i < 4; ++i)
    mine.push_back(take("n1"));
  CHECK_FALSE(gone("n1"));
  // n2 never took a liveness lock: judged by its heartbeat only, it is not gone.
  CHECK_FALSE(gone("n2"));
  // Nothing is free while n1 lives and heartbeats.
  auto none = acquire_free_lease(pool, "n2", 5s);
  REQUIRE(none);
  CHECK_FALSE(none->lease);

  // n1's process dies: its connection (and lock) with it. Its heartbeats are still fresh, and
  // yet its leases are free now, not after the 5 s lease timeout.
  n1_session.reset();
  REQUIRE(eventually([&] { return gone("n1"); }));
  auto leases = list_leases(pool, 5s);
  REQUIRE(leases);
  for (auto& l : *leases)
    CHECK(l.free);
  auto taken = take("n2");
  CHECK(taken.epoch == mine.at(0).epoch + 1);
  auto renewed = heartbeat(pool, "n1", mine);
  REQUIRE(renewed);
  CHECK(renewed->size() == 3); // the one n2 took is fenced for n1

  // n1 restarts with the same id: its lock proves the old incarnation gone, and the leases the
  // old one still owns are freed for it (handed to n1 first).
  n1_session.emplace(
    db.dsn(), [] {}, "n1");
  REQUIRE(eventually([&] { return n1_session->holds_liveness_lock(); }));
  CHECK_FALSE(gone("n1"));
  auto freed = free_previous_leases(pool, "n1", {});
  REQUIRE(freed);
  CHECK(*freed == 3);
  for (int i = 0; i < 3; ++i) {
    auto again = take("n1");
    CHECK(again.shard != taken.shard);
  }
  // A second process with the same node id does not get the lock while the first lives: once
  // its session rests after its try for the lock (idle, the try its last statement: the look
  // for gone nodes that follows is too short to be seen reliably), it has tried and failed.
  auto sessions = [&](const std::string& where) {
    return db.scalar("SELECT coalesce(string_agg(pid::text, ','), '') FROM pg_stat_activity"
                     " WHERE application_name = 'gost/n1/live'"
                     + where);
  };
  auto first = sessions("");
  REQUIRE_FALSE(first.empty());
  cluster_listener twin{db.dsn(), [] {}, "n1"};
  REQUIRE(eventually([&] {
    return !sessions(" AND pid NOT IN (" + first
                     + ") AND state = 'idle' AND query LIKE '%pg_try_advisory_lock%'")
              .empty();
  }));
  CHECK_FALSE(twin.holds_liveness_lock());
}

TEST_CASE_FIXTURE(
  fixture, "a commit frozen half-way does not keep an expired lease: its transaction is ended") {
  auto a = take("n1");
  db.scalar("UPDATE shard_leases SET owner = 'x', heartbeat_at = now() WHERE shard <> "
            + std::to_string(a.shard));
  // n1 stops heartbeating, and froze inside a commit that holds the lease row FOR SHARE.
  db.scalar("UPDATE shard_leases SET heartbeat_at = now() - interval '1 hour' WHERE shard = "
            + std::to_string(a.shard));
  pqxx::connection frozen{db.dsn()};
  {
    pqxx::nontransaction setup{frozen};
    setup.exec("SET application_name = " + frozen.quote(application_name("n1")));
  }
  pqxx::work commit{frozen};
  commit.exec("SELECT epoch FROM shard_leases WHERE shard = " + std::to_string(a.shard)
              + " FOR SHARE");
  // Older than half the lease timeout below, as PostgreSQL sees it.
  REQUIRE(eventually([&] {
    return db.scalar("SELECT xact_start < now() - interval '200 milliseconds' FROM"
                     " pg_stat_activity WHERE pid = "
                     + std::to_string(frozen.backendpid()))
           == "t";
  }));

  auto first = acquire_free_lease(pool, "n2", 400ms);
  REQUIRE(first);
  CHECK_FALSE(first->lease); // the row is locked: skipped, and its holder ended
  REQUIRE(first->ended.size() == 1);
  CHECK(first->ended[0].owner == "n1");
  CHECK(first->ended[0].pid == frozen.backendpid());
  REQUIRE(eventually([&] {
    auto r = acquire_free_lease(pool, "n2", 400ms);
    REQUIRE(r);
    return r->lease && r->lease->shard == a.shard;
  }));
  CHECK_THROWS(commit.exec("SELECT 1"));
}

TEST_CASE_FIXTURE(fixture, "a commit locks the lease rows it writes FOR SHARE and those it only "
                           "checks FOR KEY SHARE: other nodes' heartbeats and takeovers go on, "
                           "a move's fence waits") {
  // n1 holds shards 0 and 1; n2 holds 3 and held 2, whose lease expired.
  db.scalar("UPDATE shard_leases SET owner = CASE WHEN shard < 2 THEN 'n1' ELSE 'n2' END,"
            " epoch = 7, heartbeat_at = CASE WHEN shard = 2 THEN now() - interval '1 hour'"
            " ELSE now() END");
  // n1's batch writes shard 1 and checks 0, 2 and 3 (new offers' sellers' homes).
  struct write {
    uint32_t shard;
  };
  pqxx::connection batch{db.dsn()};
  pqxx::work tx{batch};
  auto leases = held_leases(tx, std::vector<write>{{1}}, "n1", {0, 2, 3});
  CHECK(leases.held == std::map<uint32_t, int64_t>{{0, 7}, {1, 7}});
  CHECK(leases.here == std::set<uint32_t>{0, 1, 2, 3});
  CHECK(leases.moved.empty());
  pqxx::connection other{db.dsn()};
  auto lockable = [&](uint32_t shard, const char* strength) {
    pqxx::work probe{other};
    try {
      probe.exec("SELECT 1 FROM shard_leases WHERE shard = " + std::to_string(shard) + " FOR "
                 + strength + " NOWAIT");
      return true;
    } catch (const pqxx::sql_error&) {
      return false;
    }
  };
  // A takeover of the written shard waits for the commit (a no-key UPDATE: acquisitions,
  // heartbeats, releases); of a checked one it does not.
  CHECK_FALSE(lockable(1, "NO KEY UPDATE"));
  CHECK(lockable(0, "NO KEY UPDATE"));
  CHECK(lockable(3, "NO KEY UPDATE"));
  // A move's fence (FOR UPDATE) waits for both.
  CHECK_FALSE(lockable(1, "UPDATE"));
  CHECK_FALSE(lockable(3, "UPDATE"));
  // Another node takes the expired shard 2 now, not after this commit.
  auto taken = acquire_free_lease(pool, "n3", 5s, {2});
  REQUIRE(taken);
  REQUIRE(taken->lease);
  CHECK(taken->lease->shard == 2);
  CHECK(taken->lease->epoch == 8);
  // n2's heartbeat of shard 3 goes through as well.
  auto beat = heartbeat(pool, "n2", {{3, 7}});
  REQUIRE(beat);
  CHECK(beat->size() == 1);
  tx.commit();
  CHECK(lockable(1, "UPDATE"));
  CHECK(lockable(3, "UPDATE"));
}

TEST_CASE("the pool names its sessions and bounds idle transactions") {
  gost::testing::temp_db db;
  auto po = pool_options(db, 1);
  po.application_name = application_name("node-a");
  po.idle_in_transaction_timeout = 1500ms;
  pg_pool pool{po};
  std::string name, timeout;
  REQUIRE_FALSE(with_connection(pool, [&](pqxx::connection& c) {
    pqxx::nontransaction tx{c};
    auto r = tx.exec("SELECT current_setting('application_name'),"
                     " current_setting('idle_in_transaction_session_timeout')");
    name = r[0][0].as<std::string>();
    timeout = r[0][1].as<std::string>();
  }));
  CHECK(name == "gost/node-a");
  CHECK(timeout == "1500ms");
}

TEST_CASE_FIXTURE(fixture, "wake notices reach every node's listener, each payload once per send") {
  std::mutex mtx;
  std::vector<std::string> heard;
  auto heard_now = [&] {
    std::lock_guard<std::mutex> guard{mtx};
    return heard;
  };
  auto count = [&](const std::string& p) {
    auto h = heard_now();
    return std::count(h.begin(), h.end(), p);
  };
  auto on_wake = [&](const std::string& payload) {
    std::lock_guard<std::mutex> guard{mtx};
    heard.push_back(payload);
  };
  cluster_listener n1{db.dsn(), [] {}, "n1", on_wake};
  cluster_listener n2{db.dsn(), [] {}, "n2", on_wake};
  // The listeners connect on their own threads: send until both listen.
  REQUIRE(eventually([&] {
    REQUIRE_FALSE(notify_wakes(pool, {"entities:3"}));
    return count("entities:3") >= 2; // heard by both
  }));
  {
    std::lock_guard<std::mutex> guard{mtx};
    heard.clear();
  }
  // One statement: duplicates go out once; a notification reaches every listener.
  REQUIRE_FALSE(notify_wakes(
    pool, {wake_payload("offers", 1), wake_payload("offers", 1), wake_payload("scheduled", 12)}));
  REQUIRE(eventually([&] { return count("scheduled:12") == 2; }));
  CHECK(count("offers:1") == 2);       // once per listener
  CHECK_FALSE(notify_wakes(pool, {})); // nothing to send: no statement, no error
}

TEST_CASE_FIXTURE(fixture, "a node's listener hears other nodes' lease acquisitions, not its own") {
  add_node("n1");
  add_node("n2");
  std::atomic<int> n1_heard{0};
  std::atomic<int> n2_heard{0};
  cluster_listener n1{db.dsn(), [&] { ++n1_heard; }, "n1"};
  cluster_listener n2{db.dsn(), [&] { ++n2_heard; }, "n2"};
  REQUIRE(eventually([&] { return n1.holds_liveness_lock() && n2.holds_liveness_lock(); }));
  // Both listen once a join notice reaches both: send until it does. From then on every notice
  // is counted.
  REQUIRE(eventually([&] {
    n1_heard = 0;
    n2_heard = 0;
    add_node("n4");
    return gost::testing::eventually(1s, [&] { return n1_heard >= 1 && n2_heard >= 1; });
  }));
  n1_heard = 0;
  n2_heard = 0;
  take("n1");
  // A later notice both hear: once n1 heard it, n1 had its own acquisition's before it
  // (notices arrive in commit order).
  add_node("n3");
  REQUIRE(eventually([&] { return n1_heard >= 1 && n2_heard >= 2; }));
  CHECK(n1_heard == 1); // the join only: its own acquisition is no news to it
  CHECK(n2_heard == 2); // n1's acquisition, then the join
}
