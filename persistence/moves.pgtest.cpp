// Moving a group's shards to another group's database (ADR 0023 decision 5): copy, catch up,
// fence, switch, clean, on three real databases (the catalog, the source, the target).
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <set>
#include <thread>

#include <pqxx/pqxx>

#include "gost/persistence/cluster/groups.hpp"
#include "gost/persistence/cluster/leases.hpp"
#include "gost/persistence/cluster/moves.hpp"
#include "gost/persistence/entities/entities.hpp"
#include "gost/persistence/errors.hpp"
#include "gost/persistence/feeds/feed_admin.hpp"
#include "gost/persistence/feeds/feed_loads.hpp"
#include "gost/persistence/feeds/feeds.hpp"
#include "gost/persistence/offers/offer_store.hpp"
#include "gost/persistence/scheduled/actions.hpp"
#include "gost/testing/process.hpp"
#include "pg_fixture.hpp"

using namespace gost::persistence;
using namespace std::chrono_literals;

namespace {

constexpr uint32_t shards = 16;

/// The catalog (group 0: main, shards 0-7), east (group 1: shards 8-15) and west (group 2,
/// declared, empty).
struct three_dbs {
  migrated_db catalog;
  migrated_db east;
  migrated_db west;

  three_dbs() {
    // Every group's database has the installation's shard count (`declare_group`).
    for (auto* db : {&catalog, &east, &west})
      db->db.scalar("INSERT INTO installation (shard_count) VALUES (16)");
    catalog.db.scalar("INSERT INTO shard_groups (id, name, dsn) VALUES (1, 'east', '"
                      + east.db.dsn() + "'), (2, 'west', '" + west.db.dsn() + "')");
    catalog.db.scalar("INSERT INTO shard_ranges (first_shard, last_shard, group_id)"
                      " VALUES (0, 7, 0), (8, 15, 1)");
    // east's shards are held by node n1 at epoch 3.
    east.db.scalar("INSERT INTO shard_leases (shard, owner, epoch, heartbeat_at)"
                   " SELECT s, 'n1', 3, now() FROM generate_series(8, 15) s");
  }

  move_plan plan() {
    auto map = load_group_map(catalog.pool, shards);
    REQUIRE(map);
    auto p = plan_move(*map, 8, 15, "west");
    REQUIRE(std::holds_alternative<move_plan>(p));
    return std::get<move_plan>(p);
  }
};

/// `n` offers of east's shards (8-15), each with a stage state, a history row and a request
/// id; plus an offer of shard 3 left there by an earlier move (not in the range).
void fill_east(const gost::testing::temp_db& east, int n) {
  east.scalar("INSERT INTO offers (offer_id, shard, seller_id, namespace, external_id, version, "
              "body) SELECT 'o' || i, 8 + i % 8, 's' || i % 5, 'ns', 'x' || i, 1, "
              "decode('0a0b' || lpad(to_hex(i), 8, '0'), 'hex') FROM generate_series(1, "
              + std::to_string(n) + ") i");
  east.scalar("INSERT INTO stage_states (offer_id, stage_id, state, shard, due_at_us)"
              " SELECT offer_id, 'audit', '\\x01', shard, 42 FROM offers");
  east.scalar("INSERT INTO offer_history (offer_id, shard, version, event)"
              " SELECT offer_id, shard, 1, '\\x02' FROM offers");
  east.scalar("INSERT INTO offer_requests (offer_id, request_id, shard, answer)"
              " SELECT offer_id, 'r1', shard, '\\x03' FROM offers");
  east.scalar("INSERT INTO offers (offer_id, shard, seller_id, namespace, version, body)"
              " VALUES ('left-behind', 3, 's', 'ns', 1, '\\x00')");
  // The outbox in commit order, a parked batch and a dead letter.
  east.scalar("INSERT INTO outbox_batches (shard, events, payload)"
              " SELECT 8 + i % 8, 1, convert_to(i::text, 'UTF8') FROM generate_series(1, 30) i");
  east.scalar("INSERT INTO outbox_parked (id, shard, events, payload, created_at, topic, msg_key,"
              " bytes, reason, error) VALUES (9999, 9, 1, '\\x07', now(), 't', 'k', 1, "
              "'message_too_large', 'too large')");
  east.scalar("INSERT INTO dead_letters (shard, offer_id, stage_id, reason)"
              " VALUES (10, 'o2', 'audit', 'crashed')");
}

std::string count(const gost::testing::temp_db& db, const std::string& table,
                  const std::string& where = "shard BETWEEN 8 AND 15") {
  return db.scalar("SELECT count(*) FROM " + table + " WHERE " + where);
}

} // namespace

TEST_CASE("shard move: every row of the range reaches the target, writes made while it copies "
          "are caught up, the leases go on at a higher epoch and the map points at the target") {
  three_dbs t;
  fill_east(t.east.db, 350);
  move_options o;
  o.batch = 100; // several batches per table
  bool changed = false;
  std::vector<std::string> steps;
  o.progress = [&](const std::string& step, const std::string& detail) {
    steps.push_back(step + ": " + detail);
    // Writes while the copy runs (after the offers' first pass): an update, a delete and an
    // insert, which the change log carries over.
    if (step == "copy" && detail == "offers: 350 rows, done" && !changed) {
      changed = true;
      t.east.db.scalar("UPDATE offers SET version = 7 WHERE offer_id = 'o1'");
      t.east.db.scalar("DELETE FROM offers WHERE offer_id = 'o2'");
      t.east.db.scalar("INSERT INTO offers (offer_id, shard, seller_id, namespace, version, body)"
                       " VALUES ('late', 12, 's', 'ns', 1, '\\x09')");
    }
  };
  auto plan = t.plan();
  auto before = load_group_map(t.catalog.pool, shards)->version();
  auto report = move_shards(t.catalog.pool, t.east.pool, t.west.pool, plan, o);
  REQUIRE_MESSAGE(report, error_message(report.error()));
  REQUIRE(changed);

  // The target holds the range as the source held it at the fence.
  CHECK(count(t.west.db, "offers") == "350");
  CHECK(t.west.db.scalar("SELECT version FROM offers WHERE offer_id = 'o1'") == "7");
  CHECK(count(t.west.db, "offers", "offer_id = 'o2'") == "0");
  CHECK(count(t.west.db, "offers", "offer_id = 'late'") == "1");
  CHECK(t.west.db.scalar("SELECT encode(body, 'hex') FROM offers WHERE offer_id = 'o255'")
        == "0a0b000000ff");
  CHECK(count(t.west.db, "stage_states", "due_at_us = 42") == "350");
  CHECK(count(t.west.db, "offer_history") == "350");
  CHECK(count(t.west.db, "offer_requests") == "350");
  CHECK(count(t.west.db, "offers", "shard < 8") == "0"); // the range only
  // The queued rows moved with new ids, the outbox in its order.
  CHECK(count(t.west.db, "outbox_batches") == "30");
  CHECK(
    t.west.db.scalar("SELECT string_agg(convert_from(payload, 'UTF8'), ',' ORDER BY id) = "
                     "(SELECT string_agg(i::text, ',' ORDER BY i) FROM generate_series(1, 30) i)"
                     " FROM outbox_batches")
    == "t");
  CHECK(count(t.west.db, "outbox_parked") == "1");
  CHECK(count(t.west.db, "dead_letters") == "1");
  CHECK(report->moved_queued == 32);
  CHECK(report->copied.at("offers") == 350);
  CHECK(report->caught_up >= 3);

  // The source: fenced leases at a new epoch, no rows of the range, no change log left.
  CHECK(t.east.db.scalar("SELECT string_agg(DISTINCT owner || '@' || epoch, ',')"
                         " FROM shard_leases WHERE shard BETWEEN 8 AND 15")
        == "moved:west@4");
  for (auto* table : {"offers", "stage_states", "offer_history", "offer_requests", "outbox_batches",
                      "outbox_parked", "dead_letters"})
    CHECK_MESSAGE(count(t.east.db, table) == "0", table);
  CHECK(count(t.east.db, "offers", "offer_id = 'left-behind'") == "1");
  // Listed as held by nobody who can take them: not free, whatever the lease timeout.
  auto listed = list_leases(t.east.pool, std::chrono::milliseconds{10'000});
  REQUIRE(listed);
  for (auto& l : *listed) {
    CHECK(l.owner == "moved:west");
    CHECK_FALSE(l.free);
    CHECK(l.heartbeat_age_ms == 0);
  }
  CHECK(t.east.db.scalar("SELECT count(*) FROM pg_trigger WHERE tgname = 'gost_move'") == "0");
  CHECK(t.east.db.scalar("SELECT count(*) FROM move_changes") == "0");

  // The history rows kept their ids; the target's sequence is past them (a new row there
  // does not collide with a copied one).
  CHECK(t.west.db.scalar("SELECT nextval('offer_history_id_seq') > (SELECT max(id) FROM "
                         "offer_history)")
        == "t");
  // The target's leases start at the fenced epoch: the next owner's acquisition makes it 5.
  CHECK(t.west.db.scalar("SELECT string_agg(DISTINCT coalesce(owner, '-') || '@' || epoch, ',')"
                         " FROM shard_leases WHERE shard BETWEEN 8 AND 15")
        == "-@4");
  auto map = load_group_map(t.catalog.pool, shards);
  REQUIRE(map);
  CHECK(map->version() == before + 2); // marked moving, then switched
  CHECK(report->map_version == map->version());
  CHECK(map->group_of(8).name == "west");
  CHECK(map->group_of(15).name == "west");
  CHECK(map->group_of(7).name == "main");
  CHECK(map->first_outside(0)->moving_to == std::nullopt);
  bool said_fence = false;
  for (auto& s : steps)
    said_fence = said_fence || s.rfind("fence: shards 8-15 fenced at `east`", 0) == 0;
  CHECK(said_fence);
}

TEST_CASE("shard move: the fence waits for a commit in flight on the range's lease, and the "
          "commit's rows move") {
  three_dbs t;
  fill_east(t.east.db, 20);
  // A writer of n1 in the middle of its commit, begun while the move copies: it holds shard
  // 9's lease row (FOR SHARE, as the write-behind's check does) and has written an offer, not
  // yet committed.
  pqxx::connection writer{t.east.db.dsn()};
  std::unique_ptr<pqxx::work> tx;
  std::atomic<bool> writing{false};
  std::atomic<bool> fenced{false};
  move_options o;
  o.progress = [&](const std::string& step, const std::string&) {
    if (step == "copy" && !tx) {
      tx = std::make_unique<pqxx::work>(writer);
      tx->exec("SELECT 1 FROM shard_leases WHERE shard = 9 AND owner = 'n1' AND epoch = 3"
               " FOR SHARE");
      tx->exec("INSERT INTO offers (offer_id, shard, seller_id, namespace, version, body)"
               " VALUES ('in-flight', 9, 's', 'ns', 1, '\\x0f')");
      // A later write commits first: its change is logged after the writer's (a higher seq)
      // and is visible to the catch-up while the writer's is not yet. The writer's must not
      // be taken as done with it.
      t.east.db.scalar("UPDATE offers SET version = 2 WHERE offer_id = 'o1'");
      writing = true;
    }
    if (step == "fence")
      fenced = true;
  };
  auto plan = t.plan();
  caf::expected<move_report> report{move_report{}};
  std::thread mover{
    [&] { report = move_shards(t.catalog.pool, t.east.pool, t.west.pool, plan, o); }};
  // The fence's UPDATE waits on the writer's lock.
  REQUIRE(gost::testing::eventually(30s, [&] { return writing.load(); }));
  bool waiting = gost::testing::eventually(30s, [&] {
    return t.east.db.scalar(
             "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
             " AND wait_event_type = 'Lock'")
           == "1";
  });
  CHECK(waiting);
  CHECK_FALSE(fenced.load());
  tx->commit(); // acknowledged: it must reach the target
  mover.join();
  REQUIRE_MESSAGE(report, error_message(report.error()));
  CHECK(fenced.load());
  CHECK(count(t.west.db, "offers", "offer_id = 'in-flight'") == "1");
  CHECK(t.west.db.scalar("SELECT version FROM offers WHERE offer_id = 'o1'") == "2");
  CHECK(count(t.west.db, "offers") == "21");
  // A commit after the fence fails the owner-and-epoch check: its lease is not n1's at 3.
  CHECK(t.east.db.scalar("SELECT count(*) FROM shard_leases WHERE shard = 9 AND owner = 'n1'"
                         " AND epoch = 3")
        == "0");
}

TEST_CASE("shard move: one cut short before its fence serves on from the source, and asked "
          "again it resumes and finishes") {
  three_dbs t;
  fill_east(t.east.db, 250);
  move_options o;
  o.batch = 50;
  int batches = 0;
  o.cancelled = [&] { return ++batches > 2; };
  auto plan = t.plan();
  auto cut = move_shards(t.catalog.pool, t.east.pool, t.west.pool, plan, o);
  REQUIRE_FALSE(cut);
  CHECK(cut.error() == db_errc::unavailable);
  CHECK(error_message(cut.error()).find("ask for the move again to resume it")
        != std::string::npos);
  // Nothing fenced: n1 still holds the range at the source; the map says it is moving.
  CHECK(count(t.east.db, "shard_leases", "owner = 'n1' AND epoch = 3") == "8");
  auto map = load_group_map(t.catalog.pool, shards);
  REQUIRE(map);
  CHECK(map->group_of(8).name == "east");
  CHECK(map->range_of(8).moving_to == std::optional<uint32_t>{2});
  // Another move is refused meanwhile; this one resumes.
  auto other = plan_move(*map, 0, 7, "west");
  CHECK(std::holds_alternative<std::string>(other));
  auto again = plan_move(*map, 8, 15, "west");
  REQUIRE(std::holds_alternative<move_plan>(again));
  CHECK(std::get<move_plan>(again).resumed);
  t.east.db.scalar("UPDATE offers SET version = 9 WHERE offer_id = 'o3'");
  move_options go_on;
  auto report =
    move_shards(t.catalog.pool, t.east.pool, t.west.pool, std::get<move_plan>(again), go_on);
  REQUIRE_MESSAGE(report, error_message(report.error()));
  CHECK(count(t.west.db, "offers") == "250");
  CHECK(t.west.db.scalar("SELECT version FROM offers WHERE offer_id = 'o3'") == "9");
  CHECK(count(t.east.db, "offers") == "0");
  CHECK(load_group_map(t.catalog.pool, shards)->group_of(8).name == "west");
}

TEST_CASE("shard move: refused before anything is written when a node of the source group does "
          "not run in the target") {
  three_dbs t;
  fill_east(t.east.db, 5);
  t.east.db.scalar("INSERT INTO nodes (node_id, caf_host, caf_port, grpc_addr, http_addr)"
                   " VALUES ('n1', 'h', 1, 'g', 'w')");
  auto plan = t.plan();
  auto refused = move_shards(t.catalog.pool, t.east.pool, t.west.pool, plan, move_options{});
  REQUIRE_FALSE(refused);
  CHECK(error_message(refused.error())
        == "node n1 serves group `east` but not group `west` (a node opens the groups declared "
           "at its start): restart it before moving shards there");
  CHECK(count(t.west.db, "offers") == "0");
  CHECK(load_group_map(t.catalog.pool, shards)->range_of(8).moving_to == std::nullopt);
  CHECK(t.east.db.scalar("SELECT owner FROM shard_leases WHERE shard = 8") == "n1"); // not fenced
}

TEST_CASE("shard move: every table of the schema with a shard column is one the move knows") {
  migrated_db m;
  auto covered = move_covered_tables();
  auto tables = m.db.scalar("SELECT string_agg(c.relname, ',' ORDER BY c.relname) FROM pg_class c"
                            " JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'shard'"
                            " WHERE c.relkind = 'r' AND c.relnamespace = 'public'::regnamespace");
  size_t pos = 0;
  int seen = 0;
  while (pos < tables.size()) {
    auto end = tables.find(',', pos);
    auto name = tables.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    ++seen;
    CHECK_MESSAGE(std::find(covered.begin(), covered.end(), name) != covered.end(),
                  name << " has a shard column: copy it in a move (keyed_tables) or move it "
                          "(queued_tables)");
    pos = end == std::string::npos ? tables.size() : end + 1;
  }
  CHECK(seen >= 10);
}

TEST_CASE("shard move: a change logged early but committed while a catch-up round copies is "
          "copied by a later round, not dropped with that round's log") {
  three_dbs t;
  fill_east(t.east.db, 20);
  pqxx::connection writer{t.east.db.dsn()};
  pqxx::connection holder{t.west.db.dsn()};
  std::unique_ptr<pqxx::work> writing;
  std::unique_ptr<pqxx::work> holding;
  std::atomic<bool> ready{false};
  move_options o;
  o.progress = [&](const std::string& step, const std::string& detail) {
    if (step != "copy" || detail != "offers: 20 rows, done" || writing)
      return;
    // A writer logs its change first (the lower seq) and stays open...
    writing = std::make_unique<pqxx::work>(writer);
    writing->exec("INSERT INTO offers (offer_id, shard, seller_id, namespace, version, body)"
                  " VALUES ('early', 9, 's', 'ns', 1, '\\x0f')");
    // ... a later change commits at once (the higher seq: the first round reads it) ...
    t.east.db.scalar("UPDATE offers SET version = 2 WHERE offer_id = 'o1'");
    // ... and the round's copy of it waits at the target while the writer commits.
    holding = std::make_unique<pqxx::work>(holder);
    holding->exec("SELECT 1 FROM offers WHERE offer_id = 'o1' FOR UPDATE");
    ready = true;
  };
  auto plan = t.plan();
  caf::expected<move_report> report{move_report{}};
  std::thread mover{
    [&] { report = move_shards(t.catalog.pool, t.east.pool, t.west.pool, plan, o); }};
  REQUIRE(gost::testing::eventually(30s, [&] { return ready.load(); }));
  // The round read the log (o1's change only: the writer's is not committed) and waits.
  REQUIRE(gost::testing::eventually(30s, [&] {
    return t.west.db.scalar("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                            "current_database() AND wait_event_type = 'Lock'")
           == "1";
  }));
  writing->commit();
  holding->commit();
  mover.join();
  REQUIRE_MESSAGE(report, error_message(report.error()));
  CHECK(count(t.west.db, "offers", "offer_id = 'early'") == "1");
  CHECK(t.west.db.scalar("SELECT version FROM offers WHERE offer_id = 'o1'") == "2");
}

namespace {

/// The home shard of a scheduled action's id (migration 0030's hash, as the scheduler's).
uint32_t home_of(const gost::testing::temp_db& db, const std::string& id) {
  return static_cast<uint32_t>(std::stoul(db.scalar("SELECT gost_shard_of('" + id + "', 16)")));
}

gost::v1::ScheduledAction action(const std::string& id) {
  gost::v1::ScheduledAction a;
  a.mutable_meta()->set_id(id);
  a.mutable_meta()->set_guid("g-" + id);
  a.mutable_spec()->set_interval_ms(1000);
  a.mutable_spec()->mutable_kafka()->set_topic("t");
  a.mutable_status()->set_scheduled_at_ms(5000);
  return a;
}

} // namespace

TEST_CASE("shard move: a group's scheduled actions move with it (their queues, their attempt "
          "logs, writes made meanwhile), and the API's writes are refused while it is fenced") {
  three_dbs t;
  fill_east(t.east.db, 20);
  for (int i = 0; i < 40; ++i)
    REQUIRE_FALSE(create_scheduled_action(t.east.pool, action("a" + std::to_string(i)), 8 + i % 8,
                                          home_of(t.east.db, "a" + std::to_string(i))));
  // Half of them moved to the processing queue by their workers; an attempt each, and one
  // written by an operator's verb (no shard).
  t.east.db.scalar("WITH m AS (DELETE FROM scheduled_incoming WHERE seq % 2 = 0 RETURNING *)"
                   " INSERT INTO scheduled_processing (shard, action_id, action_guid,"
                   " scheduled_at_ms, added_to_incoming_at, moved_by_sync, moved_at)"
                   " SELECT shard, action_id, action_guid, 5000, created_at, 's1', now() FROM m");
  t.east.db.scalar("INSERT INTO scheduled_attempts (action_id, at_ms, occurrence_ms, attempt,"
                   " outcome, node, shard, epoch) SELECT action_id, 1, 1, 1, 'ok', 'n1', 9, 3"
                   " FROM scheduled_actions");
  t.east.db.scalar("INSERT INTO scheduled_attempts (action_id, at_ms, occurrence_ms, attempt,"
                   " outcome, node) VALUES ('a1', 2, 2, 1, 'interrupted', 'console')");
  // West's own actions: left as they are.
  for (int i = 0; i < 3; ++i)
    t.west.db.scalar("INSERT INTO scheduled_actions (action_id, action_guid, meta, spec, status)"
                     " VALUES ('w"
                     + std::to_string(i) + "', 'gw', '\\x00', '\\x00', '\\x00')");
  t.west.db.scalar("INSERT INTO scheduled_attempts (action_id, at_ms, occurrence_ms, attempt,"
                   " outcome, node) VALUES ('w0', 1, 1, 1, 'ok', 'n9')");
  auto east_incoming = count(t.east.db, "scheduled_incoming");
  auto east_processing = count(t.east.db, "scheduled_processing");

  move_options o;
  o.batch = 7;
  bool changed = false;
  o.progress = [&](const std::string& step, const std::string& detail) {
    // While the copy runs, after the actions' first pass: a new action with an attempt (whose
    // parent the first pass of the attempts does not find at the target), a deleted one.
    if (step == "copy" && detail.rfind("scheduled_actions:", 0) == 0
        && detail.find("done") != std::string::npos && !changed) {
      changed = true;
      REQUIRE_FALSE(
        create_scheduled_action(t.east.pool, action("late"), 12, home_of(t.east.db, "late")));
      t.east.db.scalar("INSERT INTO scheduled_attempts (action_id, at_ms, occurrence_ms,"
                       " attempt, outcome, node, shard, epoch) VALUES ('late', 3, 3, 1, 'ok',"
                       " 'n1', 12, 3)");
      auto gone = delete_scheduled_action(t.east.pool, "a3", 11);
      REQUIRE(gone);
      CHECK(*gone);
    }
  };
  auto report = move_shards(t.catalog.pool, t.east.pool, t.west.pool, t.plan(), o);
  REQUIRE_MESSAGE(report, error_message(report.error()));
  REQUIRE(changed);

  // West holds east's actions as they were at the fence, and its own.
  CHECK(count(t.west.db, "scheduled_actions", "true") == "43"); // 40 + late - a3 + 3 own
  CHECK(count(t.west.db, "scheduled_actions", "action_id IN ('late', 'w0', 'w2')") == "3");
  CHECK(count(t.west.db, "scheduled_actions", "action_id = 'a3'") == "0");
  // A deleted action's queue rows stay (stale, its worker drops them): east's, and late's.
  CHECK(count(t.west.db, "scheduled_incoming") == std::to_string(std::stoi(east_incoming) + 1));
  CHECK(count(t.west.db, "scheduled_processing") == east_processing);
  // Attempts: 40 - a3's + the verb's + late's + west's own.
  CHECK(count(t.west.db, "scheduled_attempts", "true") == "42");
  CHECK(count(t.west.db, "scheduled_attempts", "shard IS NULL AND action_id = 'a1'") == "1");
  auto a7 = get_scheduled_action(t.west.pool, "a7");
  REQUIRE(a7);
  REQUIRE(*a7);
  CHECK((*a7)->meta().guid() == "g-a7");
  CHECK((*a7)->spec().interval_ms() == 1000);
  // Nothing of them left at the source.
  for (auto* table :
       {"scheduled_actions", "scheduled_incoming", "scheduled_processing", "scheduled_attempts"})
    CHECK_MESSAGE(count(t.east.db, table, "true") == "0", table);
  // The target's incoming sequence is past the copied rows' (a new row sorts after them).
  CHECK(t.west.db.scalar("SELECT nextval(pg_get_serial_sequence('scheduled_incoming', 'seq')) >"
                         " (SELECT max(seq) FROM scheduled_incoming)")
        == "t");

  // The source's leases stay fenced: an API write that still goes there is refused, retry.
  auto refused =
    create_scheduled_action(t.east.pool, action("stray"), 9, home_of(t.east.db, "stray"));
  REQUIRE(refused);
  CHECK(refused == db_errc::unavailable);
  CHECK_MESSAGE(error_message(refused).find("shard 9 is moving") != std::string::npos,
                error_message(refused));
  CHECK(count(t.east.db, "scheduled_actions", "true") == "0");
}

TEST_CASE("shard move: a group's image tasks and results move with it") {
  three_dbs t;
  t.east.db.scalar("INSERT INTO image_tasks (function, partition, args, ttl_ms)"
                   " SELECT 'ratio', 8 + i % 8, 'u' || i, 60000 FROM generate_series(1, 30) i");
  t.east.db.scalar("INSERT INTO image_results (result_key, function, args, status, value,"
                   " expires_at) SELECT 'k' || i, 'ratio', 'u' || i, 'done', '\\x01',"
                   " now() + interval '1 day' FROM generate_series(1, 50) i");
  t.west.db.scalar("INSERT INTO image_results (result_key, function, args, status, expires_at)"
                   " VALUES ('west-own', 'ratio', 'w', 'pending', now() + interval '1 day')");
  auto report = move_shards(t.catalog.pool, t.east.pool, t.west.pool, t.plan(), move_options{});
  REQUIRE_MESSAGE(report, error_message(report.error()));
  CHECK(count(t.west.db, "image_tasks", "true") == "30");
  CHECK(count(t.west.db, "image_results", "true") == "51");
  CHECK(count(t.west.db, "image_results", "result_key = 'west-own'") == "1");
  CHECK(count(t.east.db, "image_tasks", "true") == "0");
  CHECK(count(t.east.db, "image_results", "true") == "0");
}

TEST_CASE("shard move: a group's feeds move with it; their writes are refused once it is "
          "fenced; the sellers' locks stay behind (ADR 0023)") {
  three_dbs t;
  // A seller of east with a feed, a load waiting for the loader (its lock taken), per-offer
  // errors, a cleanup row, and the exchange's task with its items and batches.
  auto feed_of = [](const std::string& seller) {
    return feed_spec{seller, "shop", "\x08\x02", "", 0};
  };
  REQUIRE(create_feed(t.east.pool, feed_of("s1")));
  new_feed_load n;
  n.seller_id = "s1";
  n.ns = "shop";
  n.origin = "upload";
  n.sha256 = "f.xml";
  auto load = create_feed_load(t.east.pool, n);
  REQUIRE(load);
  auto job = take_feed_work(t.east.pool, "process", "n1");
  REQUIRE(job);
  REQUIRE(job->has_value());
  REQUIRE_FALSE(add_feed_offer_errors(t.east.pool, "s1", load->load_id,
                                      {{"x", 0, "error", "validation", "", "", 1, "bad"}}));
  t.east.db.scalar("INSERT INTO feed_old_loads VALUES ('s1', " + std::to_string(load->load_id)
                   + ")");
  REQUIRE(begin_feed_task(t.east.pool, "t1", "s1", "shop"));
  REQUIRE(record_feed_batch(t.east.pool, "t1", "b1", {"e1", "e2"}, nullptr));
  // West's own seller stays as it is.
  REQUIRE(create_feed(t.west.pool, feed_of("w1")));

  // While the rows are copied, another seller's feed and task come, and a load is cleaned.
  move_options o;
  bool written = false;
  o.progress = [&](const std::string& step, const std::string&) {
    if (step != "copy" || written)
      return;
    written = true;
    REQUIRE(create_feed(t.east.pool, feed_of("s2")));
    REQUIRE(begin_feed_task(t.east.pool, "t2", "s2", "shop"));
    REQUIRE(record_feed_batch(t.east.pool, "t2", "b1", {"e9"}, nullptr));
    auto cleaned = clean_old_feed_loads(t.east.pool, 10);
    REQUIRE(cleaned);
    CHECK(cleaned->loads == 1);
  };
  auto report = move_shards(t.catalog.pool, t.east.pool, t.west.pool, t.plan(), o);
  REQUIRE_MESSAGE(report, error_message(report.error()));
  CHECK(written);
  CHECK(count(t.west.db, "feeds", "true") == "3");
  CHECK(count(t.west.db, "feed_loads", "true") == "0"); // cleaned during the copy
  CHECK(count(t.west.db, "feed_offer_errors", "true") == "0");
  CHECK(count(t.west.db, "feed_old_loads", "true") == "0");
  CHECK(count(t.west.db, "feed_tasks", "true") == "2");
  CHECK(count(t.west.db, "feed_items", "true") == "3");
  CHECK(count(t.west.db, "feed_batches", "true") == "2");
  CHECK(count(t.west.db, "feed_locks", "true") == "0"); // a step the fence refuses: redone
  for (const char* table : {"feeds", "feed_loads", "feed_queue", "feed_locks", "feed_tasks",
                            "feed_items", "feed_batches", "feed_offer_errors"})
    CHECK_MESSAGE(count(t.east.db, table, "true") == "0", table);

  // A writer that still has the old map is refused at the source, not lost there; the
  // answer is UNAVAILABLE with advice, and the target takes the write.
  auto stray = create_feed(t.east.pool, feed_of("s3"));
  REQUIRE_FALSE(stray);
  CHECK(stray.error() == db_errc::unavailable);
  CHECK(error_message(stray.error())
        == "the feeds of this shard group are moving to group `west` (gostctl move-shards): "
           "retry in a moment");
  CHECK(count(t.east.db, "feeds", "true") == "0");
  REQUIRE(create_feed(t.west.pool, feed_of("s3")));
  auto finished = finish_feed_task(t.east.pool, "t1", "summary");
  CHECK(finished == db_errc::unavailable);
  REQUIRE_FALSE(finish_feed_task(t.west.pool, "t1", "summary"));
  CHECK(count(t.west.db, "feed_items", "task_id = 't1'") == "0");
}

TEST_CASE("shard move: a group's entities move with it (state, pending events and timers, kept "
          "answers, dead letters, events waiting for another group); their outputs stay where "
          "consumers' positions point (ADR 0023)") {
  three_dbs t;
  auto& east = t.east.db;
  auto& west = t.west.db;
  east.scalar("INSERT INTO entities (kind, entity_id, shard, version, state, lane, due_at_us, tag)"
              " SELECT 'task.x', 'e' || i, 8 + i % 8, i, '\\x0a', 'g', 1000 + i, 'open'"
              " FROM generate_series(1, 40) i");
  east.scalar(
    "INSERT INTO entity_events (kind, entity_id, due_at_us, payload)"
    " SELECT 'task.x', 'e' || (1 + i % 40), 1000 + i, '\\x01' FROM generate_series(1, 60) i");
  east.scalar("INSERT INTO entity_events (kind, entity_id, due_at_us, payload, timer)"
              " VALUES ('task.x', 'e3', 5000, '\\x02', 'timeout')");
  east.scalar("INSERT INTO entity_requests (kind, entity_id, request_id, seq)"
              " SELECT kind, entity_id, 'r-' || seq, seq FROM entity_events WHERE seq <= 10");
  east.scalar("INSERT INTO entity_outputs (kind, lane, entity_id, payload)"
              " SELECT 'task.x', 'g', 'e' || i, '\\x03' FROM generate_series(1, 25) i");
  east.scalar("INSERT INTO entity_dead_letters (kind, entity_id, shard, payload, reason, attempts)"
              " VALUES ('task.x', 'e5', 13, '\\x04', 'threw', 5), ('task.x', 'e6', 14, '\\x04',"
              " 'threw', 5)");
  east.scalar("INSERT INTO entity_forwards (shard, kind, entity_id, due_at_us, payload)"
              " SELECT 9, 'task.y', 'far' || i, 0, '\\x05' FROM generate_series(1, 3) i");
  auto forward_ids = east.scalar("SELECT string_agg(request_id, ',' ORDER BY request_id)"
                                 " FROM entity_forwards WHERE entity_id <> 'far1'");
  // west's own rows: a dead letter (its id is taken) and outputs of its own.
  west.scalar("INSERT INTO entity_dead_letters (kind, entity_id, shard, payload, reason, attempts)"
              " VALUES ('task.x', 'w1', 2, '\\x04', 'threw', 5)");
  west.scalar("INSERT INTO entity_outputs (kind, lane, entity_id, payload)"
              " VALUES ('task.x', 'g', 'w1', '\\x03')");
  auto max_seq = east.scalar("SELECT max(seq) FROM entity_events");

  // Writes while the range is copied (before the fence, a lease holder may still write): an
  // event handled (deleted), one added, a state moved on, a forward relayed (deleted).
  move_options o;
  bool written = false;
  o.progress = [&](const std::string& step, const std::string&) {
    if (step == "copy" && !written) {
      written = true;
      east.scalar("DELETE FROM entity_events WHERE seq = 1");
      east.scalar("INSERT INTO entity_events (kind, entity_id, due_at_us, payload)"
                  " VALUES ('task.x', 'e7', 9000, '\\x06')");
      east.scalar("UPDATE entities SET version = 100, tag = 'done' WHERE entity_id = 'e7'");
      east.scalar("DELETE FROM entity_forwards WHERE entity_id = 'far1'");
    }
  };
  auto report = move_shards(t.catalog.pool, t.east.pool, t.west.pool, t.plan(), o);
  REQUIRE_MESSAGE(report, error_message(report.error()));
  CHECK(written);
  CHECK(count(west, "entities") == "40");
  CHECK(count(west, "entity_events", "true") == "61"); // 60 + the timer - 1 + 1
  CHECK(count(west, "entity_events", "seq = 1") == "0");
  CHECK(count(west, "entity_events", "entity_id = 'e7' AND due_at_us = 9000") == "1");
  CHECK(west.scalar("SELECT due_at_us || ' ' || encode(payload, 'hex') FROM entity_events"
                    " WHERE entity_id = 'e3' AND timer = 'timeout'")
        == "5000 02");
  CHECK(west.scalar("SELECT version || ' ' || tag || ' ' || lane FROM entities"
                    " WHERE entity_id = 'e7'")
        == "100 done g");
  CHECK(count(west, "entity_requests", "true") == "10");
  // A kept request id still points at its event's seq; the target's sequence is past them.
  CHECK(count(west, "entity_requests r",
              "NOT EXISTS (SELECT 1 FROM entity_events e WHERE"
              " e.kind = r.kind AND e.entity_id = r.entity_id AND"
              " e.seq = r.seq) AND r.seq <> 1")
        == "0");
  CHECK(std::stoll(west.scalar("SELECT nextval(pg_get_serial_sequence('entity_events', 'seq'))"))
        > std::stoll(max_seq));
  // Dead letters take west's ids; forwards keep their request ids (stored once, relayed again).
  CHECK(count(west, "entity_dead_letters") == "2");
  CHECK(count(west, "entity_dead_letters", "entity_id = 'w1'") == "1");
  CHECK(west.scalar("SELECT count(DISTINCT id) FROM entity_dead_letters") == "3");
  CHECK(west.scalar("SELECT string_agg(request_id, ',' ORDER BY request_id) FROM"
                    " entity_forwards")
        == forward_ids); // far1's was relayed (deleted) during the copy
  // Nothing of the range is left at east but its outputs, which consumers read there.
  for (auto table : {"entities", "entity_dead_letters", "entity_forwards"})
    CHECK_MESSAGE(count(east, table) == "0", table);
  CHECK(count(east, "entity_events", "true") == "0");
  CHECK(count(east, "entity_requests", "true") == "0");
  CHECK(count(east, "entity_outputs", "true") == "25");
  CHECK(count(west, "entity_outputs", "true") == "1");
}

namespace {

/// `n` keys `prefix<i>` whose home shard (`gost_shard_of(kind/key)` when `kind` is given) lies
/// in first..last, as an SQL list ('a', 'b').
std::vector<std::string> keys_at_home(const gost::testing::temp_db& db, const std::string& prefix,
                                      int n, int first, int last, const std::string& kind = "") {
  auto expr = kind.empty() ? "'" + prefix + "' || i" : "'" + kind + "/" + prefix + "' || i";
  auto list = db.scalar("SELECT string_agg(k, ',') FROM (SELECT '" + prefix
                        + "' || i AS k FROM generate_series(1, 10000) i WHERE gost_shard_of(" + expr
                        + ", 16) BETWEEN " + std::to_string(first) + " AND " + std::to_string(last)
                        + " LIMIT " + std::to_string(n) + ") x");
  std::vector<std::string> out;
  for (size_t at = 0; at <= list.size();) {
    auto comma = list.find(',', at);
    if (comma == std::string::npos)
      comma = list.size();
    out.push_back(list.substr(at, comma - at));
    at = comma + 1;
  }
  REQUIRE(out.size() == static_cast<size_t>(n));
  return out;
}

/// A `task.x` entity `id` in `db`, on its home shard.
void add_entity(const gost::testing::temp_db& db, const std::string& id) {
  db.scalar("INSERT INTO entities (kind, entity_id, shard, version, state, lane, due_at_us)"
            " VALUES ('task.x', '"
            + id + "', gost_shard_of('task.x/" + id + "', 16), 1, '\\x0a', 'g', 0)");
}

/// A part of east (12-15) to west.
move_plan part_plan(three_dbs& t) {
  auto map = load_group_map(t.catalog.pool, shards);
  REQUIRE(map);
  auto p = plan_move(*map, 12, 15, "west");
  REQUIRE(std::holds_alternative<move_plan>(p));
  REQUIRE_FALSE(std::get<move_plan>(p).whole);
  return std::get<move_plan>(p);
}

} // namespace

TEST_CASE("shard move of a part of a group (a split): the rows without a shard column go by "
          "their key's home shard, the others stay and serve; writes of the part's sellers and "
          "events to its entities are refused or forwarded at the source after the fence") {
  three_dbs t;
  auto& east = t.east.db;
  auto& west = t.west.db;
  // Entities of both halves, with pending events and kept request ids.
  for (auto& [first, last, prefix] :
       {std::make_tuple(8, 11, "stay"), std::make_tuple(12, 15, "go")})
    for (auto& id : keys_at_home(east, prefix, 10, first, last, "task.x")) {
      add_entity(east, id);
      east.scalar("INSERT INTO entity_events (kind, entity_id, due_at_us, payload)"
                  " VALUES ('task.x', '"
                  + id + "', 5, '\\x01'), ('task.x', '" + id + "', 6, '\\x02')");
      east.scalar("INSERT INTO entity_requests (kind, entity_id, request_id, seq) SELECT kind,"
                  " entity_id, 'r' || seq, seq FROM entity_events WHERE entity_id = '"
                  + id + "' AND due_at_us = 5");
    }
  // Image tasks and results of every partition of east.
  t.east.db.scalar("INSERT INTO image_tasks (function, partition, args, ttl_ms)"
                   " SELECT 'ratio', 8 + i % 8, 'u' || i, 60000 FROM generate_series(1, 40) i");
  t.east.db.scalar(
    "INSERT INTO image_results (result_key, function, args, status, expires_at)"
    " SELECT k, 'ratio', k, 'done', now() + interval '1 day' FROM (SELECT md5(i::text)"
    " AS k FROM generate_series(1, 400) i) x"
    " WHERE gost_result_partition(k, 16) BETWEEN 8 AND 15");
  // Feeds of sellers of both halves, with an exchange task and its items.
  auto feed_of = [](const std::string& seller) {
    return feed_spec{seller, "shop", "\x08\x02", "", 0};
  };
  auto staying = keys_at_home(east, "seller-a", 3, 8, 11);
  auto going = keys_at_home(east, "seller-b", 3, 12, 15);
  for (auto* sellers : {&staying, &going})
    for (auto& seller : *sellers) {
      REQUIRE(create_feed(t.east.pool, feed_of(seller)));
      REQUIRE(begin_feed_task(t.east.pool, "t-" + seller, seller, "shop"));
      REQUIRE(record_feed_batch(t.east.pool, "t-" + seller, "b1", {"e1", "e2"}, nullptr));
      // A key claim and a spread row (migration 0031) of each seller: they go by seller too.
      east.scalar("INSERT INTO offer_keys (seller_id, namespace, external_id, offer_id) VALUES ('"
                  + seller + "', 'shop', 'k1', 'stray-" + seller + "')");
      east.scalar("INSERT INTO seller_spread (seller_id, stray_shard) VALUES ('" + seller
                  + "', 3)");
    }
  auto home_of = [&](const gost::testing::temp_db& db, const std::string& table,
                     const std::string& home) {
    return db.scalar("SELECT count(*) FILTER (WHERE " + home
                     + " BETWEEN 12 AND 15) || '/' ||"
                       " count(*) FILTER (WHERE "
                     + home + " BETWEEN 8 AND 11) FROM " + table);
  };
  const std::string entity_home = "gost_shard_of(kind || '/' || entity_id, 16)";
  auto events_before = home_of(east, "entity_events", entity_home);
  CHECK(events_before == "20/20");
  auto results_before = home_of(east, "image_results", "gost_result_partition(result_key, 16)");

  // While the rows are copied, each half is written: an event added to one entity of each, a
  // batch to a moving seller's task.
  move_options o;
  o.batch = 7;
  bool written = false;
  o.progress = [&](const std::string& step, const std::string& detail) {
    // Once the tables these writes touch are copied: the catch-up carries them.
    if (step != "copy" || detail.rfind("entity_requests", 0) != 0 || written)
      return;
    written = true;
    for (auto* prefix : {"stay", "go"})
      east.scalar("INSERT INTO entity_events (kind, entity_id, due_at_us, payload) SELECT kind,"
                  " entity_id, 7, '\\x03' FROM entities WHERE entity_id LIKE '"
                  + std::string{prefix} + "%' ORDER BY entity_id LIMIT 1");
    REQUIRE(record_feed_batch(t.east.pool, "t-" + going[0], "b2", {"e3"}, nullptr));
  };
  auto report = move_shards(t.catalog.pool, t.east.pool, t.west.pool, part_plan(t), o);
  REQUIRE_MESSAGE(report, error_message(report.error()));
  CHECK(written);

  // The map: east keeps 8-11, west holds 12-15, its leases a higher epoch than east's were.
  auto map = load_group_map(t.catalog.pool, shards);
  REQUIRE(map);
  CHECK(map->group_of(11).name == "east");
  CHECK(map->group_of(12).name == "west");
  CHECK(map->group_of(15).name == "west");
  CHECK_FALSE(map->range_of(12).moving_to);
  CHECK(west.scalar("SELECT string_agg(shard || ':' || epoch, ',' ORDER BY shard) FROM"
                    " shard_leases")
        == "12:4,13:4,14:4,15:4");
  CHECK(east.scalar("SELECT count(*) FROM shard_leases WHERE owner = 'n1' AND epoch = 3")
        == "4"); // 8-11 serve on

  // Each row by its home: the part's at west only, the rest at east only.
  CHECK(home_of(west, "entities", "shard") == "10/0");
  CHECK(home_of(east, "entities", "shard") == "0/10");
  CHECK(home_of(west, "entity_events", entity_home) == "21/0");
  CHECK(home_of(east, "entity_events", entity_home) == "0/21");
  CHECK(home_of(west, "entity_requests", entity_home) == "10/0");
  CHECK(home_of(east, "entity_requests", entity_home) == "0/10");
  CHECK(home_of(west, "image_tasks", "partition") == "20/0");
  CHECK(home_of(east, "image_tasks", "partition") == "0/20");
  auto r_west = home_of(west, "image_results", "gost_result_partition(result_key, 16)");
  auto r_east = home_of(east, "image_results", "gost_result_partition(result_key, 16)");
  CHECK(r_west.substr(r_west.find('/')) == "/0");
  CHECK(r_east.substr(0, r_east.find('/')) == "0");
  CHECK(r_west.substr(0, r_west.find('/')) + "/" + r_east.substr(r_east.find('/') + 1)
        == results_before);
  const std::string seller_home = "gost_shard_of(seller_id, 16)";
  CHECK(home_of(west, "feeds", seller_home) == "3/0");
  CHECK(home_of(east, "feeds", seller_home) == "0/3");
  CHECK(home_of(west, "feed_tasks", seller_home) == "3/0");
  for (auto table : {"offer_keys", "seller_spread"}) {
    CAPTURE(table);
    CHECK(home_of(west, table, seller_home) == "3/0");
    CHECK(home_of(east, table, seller_home) == "0/3");
  }
  CHECK(west.scalar("SELECT count(*) FROM feed_items") == "7"); // 3 x 2, and e3
  CHECK(east.scalar("SELECT count(*) FROM feed_items") == "6");
  CHECK(east.scalar("SELECT count(*) FROM move_changes") == "0");

  // After the fence, at the source: a moved seller's feed write is refused (UNAVAILABLE,
  // retry), a staying seller's is taken.
  auto stray = begin_feed_task(t.east.pool, "t-late", going[1], "shop");
  REQUIRE_FALSE(stray);
  CHECK(stray.error() == db_errc::unavailable);
  CHECK(error_message(stray.error()).find("moved to group `west`") != std::string::npos);
  REQUIRE(begin_feed_task(t.east.pool, "t-late", staying[1], "shop"));
  REQUIRE(record_feed_batch(t.east.pool, "t-late", "b1", {"e1"}, nullptr)); // by its task
  // A task of a moved seller left at the source (as if written past the fence): its items are
  // refused too, found through the task.
  east.scalar("BEGIN; SET LOCAL gost.moving = 'on'; INSERT INTO feed_tasks (task_id, seller_id,"
              " namespace) VALUES ('t-stale', '"
              + going[2] + "', 'shop'); COMMIT");
  auto stale = record_feed_batch(t.east.pool, "t-stale", "b1", {"e1"}, nullptr);
  REQUIRE_FALSE(stale);
  CHECK(stale.error() == db_errc::unavailable);
  CHECK(east.scalar("SELECT count(*) FROM feed_items WHERE task_id = 't-stale'") == "0");
  // An entity of east (shard 8-11) sending to one of each half: the moved one's event is kept
  // as a forward, relayed to west by east's owner; the other is an event here.
  auto sender = keys_at_home(east, "stay", 1, 8, 11, "task.x")[0];
  auto sender_shard = static_cast<uint32_t>(
    std::stoul(east.scalar("SELECT shard FROM entities WHERE entity_id = '" + sender + "'")));
  entity_write w;
  w.kind = "task.x";
  w.entity_id = sender;
  w.expected_version = -1;
  for (auto* prefix : {"stay", "go"}) {
    entity_event_out e;
    e.kind = "task.x";
    e.entity_id = keys_at_home(east, prefix, 2, std::string{prefix} == "stay" ? 8 : 12,
                               std::string{prefix} == "stay" ? 11 : 15, "task.x")[1];
    e.shard = static_cast<uint32_t>(
      std::stoul(east.scalar("SELECT gost_shard_of('task.x/" + e.entity_id + "', 16)")));
    e.due_at_us = 9;
    e.payload = "p";
    w.events.push_back(e);
  }
  auto out = commit_entity_writes(t.east.pool, {{sender_shard, 3, w}}, "n1");
  REQUIRE(out);
  CHECK(out->front() == write_outcome::committed);
  CHECK(east.scalar("SELECT count(*) FROM entity_events WHERE due_at_us = 9") == "1");
  CHECK(east.scalar("SELECT entity_id || ':' || shard FROM entity_forwards")
        == w.events[1].entity_id + ":" + std::to_string(sender_shard));
}

TEST_CASE("shard move of a part: refused while the source holds offers (nothing written); "
          "offers that come during the copy undo it before the fence") {
  three_dbs t;
  t.east.db.scalar("INSERT INTO offers (offer_id, shard, seller_id, namespace, version, body)"
                   " VALUES ('o1', 9, 's', 'ns', 1, '\\x00')");
  auto refused = move_shards(t.catalog.pool, t.east.pool, t.west.pool, part_plan(t), {});
  REQUIRE_FALSE(refused);
  CHECK(refused.error() == db_errc::schema_mismatch);
  CHECK(error_message(refused.error()).find("group `east` holds offers") != std::string::npos);
  CHECK(error_message(refused.error()).find("move the whole group instead") != std::string::npos);
  CHECK(t.catalog.db.scalar("SELECT count(*) FROM shard_ranges WHERE moving_to IS NOT NULL")
        == "0");
  CHECK(t.east.db.scalar("SELECT count(*) FROM pg_trigger WHERE tgname = 'gost_move'") == "0");
  t.east.db.scalar("DELETE FROM offers");

  // Entities to copy; an offer arrives while they are copied.
  for (auto& id : keys_at_home(t.east.db, "go", 5, 12, 15, "task.x"))
    add_entity(t.east.db, id);
  move_options o;
  o.progress = [&](const std::string& step, const std::string&) {
    if (step == "copy")
      t.east.db.scalar("INSERT INTO offers (offer_id, shard, seller_id, namespace, version, body)"
                       " VALUES ('o2', 9, 's', 'ns', 1, '\\x00') ON CONFLICT DO NOTHING");
  };
  refused = move_shards(t.catalog.pool, t.east.pool, t.west.pool, part_plan(t), o);
  REQUIRE_FALSE(refused);
  CHECK(error_message(refused.error()).find("holds offers") != std::string::npos);
  // Undone: the map takes moves again, west holds none of the copies, east serves on.
  CHECK(t.catalog.db.scalar("SELECT count(*) FROM shard_ranges WHERE moving_to IS NOT NULL")
        == "0");
  CHECK(t.west.db.scalar("SELECT count(*) FROM entities") == "0");
  CHECK(t.east.db.scalar("SELECT count(*) FROM entities") == "5");
  CHECK(t.east.db.scalar("SELECT count(*) FROM pg_trigger WHERE tgname = 'gost_move'") == "0");
  CHECK(t.east.db.scalar("SELECT count(*) FROM shard_leases WHERE owner = 'n1'") == "8");
  auto map = load_group_map(t.catalog.pool, shards);
  REQUIRE(map);
  CHECK(map->group_of(12).name == "east");
  // The whole group moves (its offers with it).
  REQUIRE(move_shards(t.catalog.pool, t.east.pool, t.west.pool, t.plan(), {}));
}

TEST_CASE("shard move of a part holding offers (split_offers): each offer the cut leaves outside "
          "its seller's home group gets its key claimed in the home database and its seller a "
          "spread row there; lookups by key find it through the claim") {
  three_dbs t;
  auto& east = t.east.db;
  auto& west = t.west.db;
  // Sellers whose home stays in east (8-11) and sellers whose home goes to west (12-15); each
  // has a keyed offer on shard 9 (stays) and on shard 13 (goes), and one seller of each a
  // keyless offer on the other side than its home.
  auto staying = keys_at_home(east, "seller-a", 2, 8, 11);
  auto going = keys_at_home(east, "seller-b", 2, 12, 15);
  std::sort(staying.begin(), staying.end()); // as the checks below list them
  std::sort(going.begin(), going.end());
  auto offer = [&](const std::string& id, int shard, const std::string& seller,
                   const std::string& external) {
    east.scalar("INSERT INTO offers (offer_id, shard, seller_id, namespace, external_id, version,"
                " body) VALUES ('"
                + id + "', " + std::to_string(shard) + ", '" + seller + "', 'shop', "
                + (external.empty() ? std::string{"NULL"} : "'" + external + "'")
                + ", 1, '\\x00')");
  };
  for (auto* sellers : {&staying, &going})
    for (auto& seller : *sellers) {
      offer(seller + "-o9", 9, seller, "k9");
      offer(seller + "-o13", 13, seller, "k13");
    }
  offer(staying[0] + "-bare", 14, staying[0], "");
  offer(going[0] + "-bare", 10, going[0], "");
  // A key claimed in east before (an earlier split), of a seller whose home goes: it goes too.
  east.scalar("INSERT INTO offer_keys (seller_id, namespace, external_id, offer_id) VALUES ('"
              + going[1] + "', 'shop', 'far', 'elsewhere-1')");

  // Still refused without the switch.
  auto refused = move_shards(t.catalog.pool, t.east.pool, t.west.pool, part_plan(t), {});
  REQUIRE_FALSE(refused);
  CHECK(error_message(refused.error()).find("holds offers") != std::string::npos);

  move_options o;
  o.split_offers = true;
  std::string said;
  o.progress = [&](const std::string& step, const std::string& detail) {
    if (step == "fence" && detail.find("home group") != std::string::npos)
      said = detail;
  };
  auto report = move_shards(t.catalog.pool, t.east.pool, t.west.pool, part_plan(t), o);
  REQUIRE_MESSAGE(report, error_message(report.error()));
  // The offers are where their shards are.
  auto shards_of = [](const gost::testing::temp_db& db) {
    return db.scalar("SELECT string_agg(s::text, ',' ORDER BY s) FROM (SELECT DISTINCT shard AS s"
                     " FROM offers) x");
  };
  CHECK(shards_of(east) == "9,10");
  CHECK(shards_of(west) == "13,14");
  auto claims = [](const gost::testing::temp_db& db) {
    return db.scalar(
      "SELECT coalesce(string_agg(seller_id || '/' || external_id || '>' || offer_id,"
      " ',' ORDER BY seller_id, external_id), '') FROM offer_keys");
  };
  auto spread = [](const gost::testing::temp_db& db) {
    return db.scalar("SELECT coalesce(string_agg(seller_id || '@' || stray_shard, ',' ORDER BY"
                     " seller_id, stray_shard), '') FROM seller_spread");
  };
  // Moving out (shards 13 and 14, home in east): claimed in east, their sellers spread to
  // those shards (a keyless offer has no claim, but its shard is named).
  CHECK(claims(east)
        == staying[0] + "/k13>" + staying[0] + "-o13," + staying[1] + "/k13>" + staying[1]
             + "-o13");
  CHECK(spread(east) == staying[0] + "@13," + staying[0] + "@14," + staying[1] + "@13");
  // Staying (shards 9 and 10, home now in west): claimed in west, spread to those shards;
  // the earlier claim of a seller going home to west went with it.
  CHECK(claims(west)
        == going[0] + "/k9>" + going[0] + "-o9," + going[1] + "/far>elsewhere-1," + going[1]
             + "/k9>" + going[1] + "-o9");
  CHECK(spread(west) == going[0] + "@9," + going[0] + "@10," + going[1] + "@9");
  CHECK(report->claimed == 4);
  CHECK(report->spread == 4);
  CHECK(said.find("4 keys claimed, 4 sellers spread") != std::string::npos);

  // A lookup by key reads the seller's home database: the stray's id through its claim, an
  // offer at home from `offers`.
  offer_store at_east{t.east.pool};
  offer_store at_west{t.west.pool};
  auto id = at_east.find_id(staying[0], "shop", "k13");
  REQUIRE(id);
  CHECK(id->value_or("") == staying[0] + "-o13");
  id = at_east.find_id(staying[0], "shop", "k9");
  REQUIRE(id);
  CHECK(id->value_or("") == staying[0] + "-o9");
  id = at_west.find_id(going[1], "shop", "k9");
  REQUIRE(id);
  CHECK(id->value_or("") == going[1] + "-o9");
  id = at_west.find_id(going[1], "shop", "k13");
  REQUIRE(id);
  CHECK(id->value_or("") == going[1] + "-o13");

  // The range moves back (west's whole group): every stray comes home, in both directions
  // (east's strays of shard 13 come to their sellers' homes; west's sellers' homes come to
  // their strays of shard 9). Their claims and spread rows go; the claim of an offer in a
  // third database stays.
  auto map = load_group_map(t.catalog.pool, shards);
  REQUIRE(map);
  auto back = plan_move(*map, 12, 15, "east");
  REQUIRE(std::holds_alternative<move_plan>(back));
  std::string unclaimed;
  move_options again;
  again.progress = [&](const std::string& step, const std::string& detail) {
    if (step == "fence" && detail.find("come home") != std::string::npos)
      unclaimed = detail;
  };
  report = move_shards(t.catalog.pool, t.west.pool, t.east.pool, std::get<move_plan>(back), again);
  REQUIRE_MESSAGE(report, error_message(report.error()));
  CHECK(claims(east) == going[1] + "/far>elsewhere-1");
  CHECK(spread(east) == "");
  CHECK(report->unclaimed == 4);
  CHECK(unclaimed == "4 keys of offers come home unclaimed, 6 spread rows dropped");
  // A key change at home now frees the old key: nothing claims it.
  east.scalar("UPDATE offers SET external_id = 'k13b' WHERE offer_id = '" + staying[0] + "-o13'");
  id = at_east.find_id(staying[0], "shop", "k13");
  REQUIRE(id);
  CHECK_FALSE(id->has_value());
}

TEST_CASE("shard move of a part: each scheduled action goes with its id's home shard; one whose "
          "queue rows are on the other side gets a new guid and an incoming row on its home "
          "shard, so each side's workers fire their own; the API's writes for the part are "
          "refused at the source after") {
  three_dbs t;
  // 40 actions of east, their incoming rows on shards drawn over east's 8-15 (as the scheduler
  // draws in the home group); half of them moved to processing by their workers.
  std::map<std::string, uint32_t> home;
  auto ids = keys_at_home(t.east.db, "a", 40, 8, 15); // east's actions: their homes are east's
  for (int i = 0; i < 40; ++i) {
    auto& id = ids[static_cast<size_t>(i)];
    REQUIRE_FALSE(
      create_scheduled_action(t.east.pool, action(id), 8 + (i * 3) % 8, home_of(t.east.db, id)));
    home[id] =
      static_cast<uint32_t>(std::stoul(t.east.db.scalar("SELECT gost_shard_of('" + id + "', 16)")));
  }
  t.east.db.scalar("WITH m AS (DELETE FROM scheduled_incoming WHERE seq % 2 = 0 RETURNING *)"
                   " INSERT INTO scheduled_processing (shard, action_id, action_guid,"
                   " scheduled_at_ms, added_to_incoming_at, moved_by_sync, moved_at)"
                   " SELECT shard, action_id, action_guid, 5000, created_at, 's1', now() FROM m");
  auto moving = [&](const std::string& id) { return home.at(id) >= 12; };
  auto crossing = [&](const std::string& id) {
    auto rows = queue_rows_of(t.east.pool, id, "g-" + id);
    REQUIRE(rows);
    REQUIRE(rows->size() == 1);
    return (rows->front().shard >= 12) != moving(id);
  };
  int moving_count = 0, crossing_count = 0;
  std::set<std::string> crossed;
  for (auto& [id, h] : home) {
    moving_count += moving(id) ? 1 : 0;
    if (crossing(id))
      crossed.insert(id);
  }
  crossing_count = static_cast<int>(crossed.size());
  REQUIRE(moving_count > 0);
  REQUIRE(moving_count < 40);
  REQUIRE(crossing_count > 0);

  std::vector<std::string> said;
  move_options o;
  o.progress = [&](const std::string& step, const std::string& detail) {
    said.push_back(step + ": " + detail);
  };
  auto report = move_shards(t.catalog.pool, t.east.pool, t.west.pool, part_plan(t), o);
  REQUIRE_MESSAGE(report, error_message(report.error()));
  CHECK(std::find(said.begin(), said.end(),
                  "fence: scheduled actions: " + std::to_string(crossing_count)
                    + " given queue rows on their home shards")
        != said.end());
  CHECK(count(t.west.db, "scheduled_actions", "true") == std::to_string(moving_count));
  CHECK(count(t.east.db, "scheduled_actions", "true") == std::to_string(40 - moving_count));

  // Each side's workers take their shards' rows: the current guid's row of every action of
  // that side becomes due in processing, the stale rows are dropped.
  t.west.db.scalar("UPDATE shard_leases SET owner = 'n2', epoch = epoch + 1");
  for (uint32_t shard = 8; shard < 16; ++shard) {
    auto& pool = shard >= 12 ? t.west.pool : t.east.pool;
    auto& db = shard >= 12 ? t.west.db : t.east.db;
    scheduled_lease lease{shard,
                          std::stoll(db.scalar("SELECT epoch FROM shard_leases WHERE shard = "
                                               + std::to_string(shard))),
                          shard >= 12 ? "n2" : "n1"};
    auto moved = move_incoming(pool, lease, "sync-1", 1000);
    REQUIRE(moved);
    CHECK_FALSE(moved->fenced);
  }
  for (auto& [id, h] : home) {
    auto& pool = moving(id) ? t.west.pool : t.east.pool;
    auto a = get_scheduled_action(pool, id);
    REQUIRE(a);
    REQUIRE_MESSAGE(*a, id);
    auto guid = (*a)->meta().guid();
    CHECK_MESSAGE((guid != "g-" + id) == (crossed.count(id) != 0), id);
    auto rows = queue_rows_of(pool, id, guid);
    REQUIRE(rows);
    REQUIRE_MESSAGE(rows->size() == 1, id); // the invariant: one row for the current guid
    CHECK(rows->front().processing);
    CHECK_MESSAGE((rows->front().shard >= 12) == moving(id), id);
    CHECK(rows->front().scheduled_at_ms == std::optional<int64_t>{5000});
  }
  CHECK(count(t.east.db, "scheduled_incoming", "true") == "0");
  CHECK(count(t.west.db, "scheduled_incoming", "true") == "0");

  // An API write for a moving action that still reaches the source (the old map) is refused,
  // whatever shard its incoming row was drawn on: its home shard is fenced there.
  std::string gone;
  for (auto& [id, h] : home)
    if (moving(id))
      gone = id;
  auto changed = change_scheduled_action(
    t.east.pool, gone, [](gost::v1::ScheduledAction&) { return caf::error{}; }, 9,
    home_of(t.east.db, gone));
  REQUIRE_FALSE(changed);
  CHECK(changed.error() == db_errc::unavailable);
  CHECK(error_message(changed.error()).find("is moving") != std::string::npos);
  // One of the staying part is taken.
  auto staying = keys_at_home(t.east.db, "new", 1, 8, 11)[0];
  REQUIRE_FALSE(
    create_scheduled_action(t.east.pool, action(staying), 9, home_of(t.east.db, staying)));
}

TEST_CASE("shard move of a part, asked again: cut short before its fence it resumes without the "
          "rows deleted meanwhile, or is undone if offers came; cut short after its fence it "
          "finishes whatever the source holds") {
  three_dbs t;
  auto& east = t.east.db;
  auto& west = t.west.db;
  auto ids = keys_at_home(east, "go", 6, 12, 15, "task.x");
  for (auto& id : ids) {
    add_entity(east, id);
    east.scalar("INSERT INTO entity_events (kind, entity_id, due_at_us, payload) VALUES"
                " ('task.x', '"
                + id + "', 5, '\\x01')");
  }
  // Cut short once the entities' events are copied (before the fence).
  bool stop = false;
  move_options o;
  o.cancelled = [&] { return stop; };
  o.progress = [&](const std::string& step, const std::string& detail) {
    if (step == "copy" && detail.rfind("entity_events", 0) == 0)
      stop = true;
  };
  auto cut = move_shards(t.catalog.pool, t.east.pool, t.west.pool, part_plan(t), o);
  REQUIRE_FALSE(cut);
  CHECK(cut.error() == db_errc::unavailable);
  REQUIRE(west.scalar("SELECT count(*) FROM entity_events") == "6");
  // An event handled at the source meanwhile: the resumed move must not bring it back.
  east.scalar("DELETE FROM entity_events WHERE entity_id = '" + ids[0] + "'");
  auto resumed_plan = part_plan(t);
  CHECK(resumed_plan.resumed);
  auto done = move_shards(t.catalog.pool, t.east.pool, t.west.pool, resumed_plan, {});
  REQUIRE_MESSAGE(done, error_message(done.error()));
  CHECK(west.scalar("SELECT count(*) FROM entity_events") == "5");
  CHECK(west.scalar("SELECT count(*) FROM entity_events WHERE entity_id = '" + ids[0] + "'")
        == "0");

  // Back to east (a whole group now: west holds 12-15 only), then a part again, cut short
  // before its fence; offers come, and the move asked again is refused and undone.
  {
    auto map = load_group_map(t.catalog.pool, shards);
    REQUIRE(map);
    auto back = plan_move(*map, 12, 15, "east");
    REQUIRE(std::holds_alternative<move_plan>(back));
    CHECK(std::get<move_plan>(back).whole);
    REQUIRE(move_shards(t.catalog.pool, t.west.pool, t.east.pool, std::get<move_plan>(back), {}));
  }
  stop = false;
  cut = move_shards(t.catalog.pool, t.east.pool, t.west.pool, part_plan(t), o);
  REQUIRE_FALSE(cut);
  east.scalar("INSERT INTO offers (offer_id, shard, seller_id, namespace, version, body)"
              " VALUES ('o1', 9, 's', 'ns', 1, '\\x00')");
  auto refused = move_shards(t.catalog.pool, t.east.pool, t.west.pool, part_plan(t), {});
  REQUIRE_FALSE(refused);
  CHECK(error_message(refused.error()).find("holds offers") != std::string::npos);
  CHECK(t.catalog.db.scalar("SELECT count(*) FROM shard_ranges WHERE moving_to IS NOT NULL")
        == "0");
  CHECK(west.scalar("SELECT count(*) FROM entity_events") == "0");
  CHECK(west.scalar("SELECT count(*) FROM entities") == "0");
  CHECK(east.scalar("SELECT count(*) FROM entity_events") == "5");

  // Cut short right after its fence (the progress callback throws there): asked again with
  // offers at the source, it finishes (the range serves nowhere until it does).
  east.scalar("DELETE FROM offers");
  struct after_fence {};
  move_options f;
  f.progress = [&](const std::string& step, const std::string& detail) {
    if (step == "fence" && detail.find("fenced at") != std::string::npos)
      throw after_fence{};
  };
  CHECK_THROWS_AS(move_shards(t.catalog.pool, t.east.pool, t.west.pool, part_plan(t), f),
                  after_fence);
  east.scalar("INSERT INTO offers (offer_id, shard, seller_id, namespace, version, body)"
              " VALUES ('o2', 9, 's', 'ns', 1, '\\x00')");
  auto finished = move_shards(t.catalog.pool, t.east.pool, t.west.pool, part_plan(t), {});
  REQUIRE_MESSAGE(finished, error_message(finished.error()));
  CHECK(west.scalar("SELECT count(*) FROM entity_events") == "5");
  CHECK(east.scalar("SELECT count(*) FROM entity_events") == "0");
  auto map = load_group_map(t.catalog.pool, shards);
  REQUIRE(map);
  CHECK(map->group_of(12).name == "west");
}
