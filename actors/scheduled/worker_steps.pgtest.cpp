// The worker's steps and the API's changes on the real PostgreSQL (ADR 0011):
// - the seed's invariant (exactly one queue row with an action's id and current guid) checked
//   after every step of a random history of creates, updates, deletes, the operator's verbs
//   (pause, resume, run-now), moves, attempts begun and finished, worker crashes (the lease
//   taken at a new epoch, the old worker fenced) and whole iterations;
// - the status counters exact at the end: every attempt begun is counted once — as a
//   success, a failure, a recounted interruption, or lost to an update made mid-attempt;
// - bad input stores nothing.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>

#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>

#include "gost/core/errc.hpp"
#include "gost/core/shard_hash.hpp"
#include "gost/persistence/cluster/leases.hpp"
#include "gost/persistence/cluster/placement.hpp"
#include "gost/persistence/pg_pool.hpp"
#include "gost/persistence/schema.hpp"
#include "gost/scheduled/scheduler.hpp"
#include "gost/scheduled/worker_steps.hpp"
#include "gost/testing/pg.hpp"
#include "gost/testing/two_groups.hpp"

using namespace gost;
using namespace gost::scheduled;
using persistence::due_row;
using persistence::scheduled_lease;
using persistence::step_outcome;
using namespace std::chrono_literals;

namespace {

constexpr int64_t t0 = 1'704'067'200'000; // 2024-01-01T00:00:00Z
constexpr uint32_t shards = 4;

persistence::pg_pool::options pool_options(const testing::temp_db& db) {
  persistence::pg_pool::options o;
  o.dsn = db.dsn();
  o.size = 2;
  return o;
}

struct world {
  testing::temp_db db;
  persistence::pg_pool pool{pool_options(db)};
  int64_t now = t0;
  rules_options opts;
  std::unique_ptr<scheduler> api;
  std::vector<std::unique_ptr<worker_steps>> workers;

  world() {
    REQUIRE(persistence::migrate(pool));
    REQUIRE_FALSE(persistence::ensure_lease_rows(pool, shards));
    for (uint32_t i = 0; i < shards; ++i) {
      auto r = persistence::acquire_free_lease(pool, "n1", 5s);
      REQUIRE(r);
      REQUIRE(r->lease);
    }
    opts.default_backoff_ms = 20;
    api = std::make_unique<scheduler>(pool, shards, opts, [this] { return now; });
    for (uint32_t s = 0; s < shards; ++s)
      workers.push_back(make_worker(s));
  }

  std::unique_ptr<worker_steps> make_worker(uint32_t shard) {
    auto epoch = std::stoll(
      db.scalar("SELECT epoch FROM shard_leases WHERE shard = " + std::to_string(shard)));
    return std::make_unique<worker_steps>(pool, scheduled_lease{shard, epoch, "n1"}, opts,
                                          [this] { return now; });
  }

  /// Actions whose current (id, guid) is not on exactly one queue row.
  std::string broken() {
    return db.scalar(
      "SELECT string_agg(a.action_id || '=' || ("
      "  (SELECT count(*) FROM scheduled_incoming i WHERE i.action_id = a.action_id"
      "   AND i.action_guid = a.action_guid) + (SELECT count(*) FROM scheduled_processing p"
      "   WHERE p.action_id = a.action_id AND p.action_guid = a.action_guid))::text, ',')"
      " FROM scheduled_actions a WHERE (SELECT count(*) FROM scheduled_incoming i"
      "  WHERE i.action_id = a.action_id AND i.action_guid = a.action_guid)"
      " + (SELECT count(*) FROM scheduled_processing p WHERE p.action_id = a.action_id"
      "  AND p.action_guid = a.action_guid) <> 1");
  }

  int64_t count(const std::string& sql) { return std::stoll(db.scalar(sql)); }
};

v1::ScheduledActionSpec random_spec(std::mt19937& rng, int64_t now) {
  v1::ScheduledActionSpec s;
  s.set_start_at_ms(now + static_cast<int64_t>(rng() % 300));
  switch (rng() % 3) {
    case 0: break; // once
    case 1: s.set_interval_ms(50 + static_cast<int64_t>(rng() % 400)); break;
    default: s.set_cron("* * * * *");
  }
  s.mutable_retry()->set_max_attempts(1 + static_cast<int32_t>(rng() % 3));
  s.mutable_kafka()->set_topic("t");
  return s;
}

/// What the test knows of an action's attempts, to check its counters.
struct model {
  int64_t begun = 0;
  int64_t ok = 0;
  int64_t failed = 0;
  int64_t lost = 0; ///< in flight when an update started the schedule over
  bool in_flight = false;
  bool paused = false; ///< by a verb: nothing may fire
};

/// An attempt begun by a worker and not finished yet.
struct pending {
  due_row row;
  attempt at;
};

} // namespace

TEST_CASE("the guid invariant holds after every step of a random history with crashes") {
  world w;
  // GOST_TEST_SEED replays a history (the seed is printed when the test fails).
  auto seed = std::getenv("GOST_TEST_SEED")
                ? static_cast<unsigned>(std::stoul(std::getenv("GOST_TEST_SEED")))
                : std::random_device{}();
  INFO("seed " << seed);
  std::mt19937 rng{seed};
  std::map<std::string, model> models;
  std::vector<std::optional<pending>> open(shards);
  // Workers that crashed with an attempt in flight: their lease was taken over since.
  std::vector<std::pair<std::unique_ptr<worker_steps>, std::optional<pending>>> zombies;
  int64_t ops[13] = {};
  auto id_of = [&] { return "a" + std::to_string(rng() % 24); };
  auto finish = [&](uint32_t s, bool ok) {
    auto& p = *open[s];
    auto f = w.workers[s]->finish(p.row, p.at, ok ? "" : "503");
    REQUIRE(f);
    if (*f == step_outcome::done) {
      auto& m = models.at(p.at.action_id);
      (ok ? m.ok : m.failed) += 1;
      m.in_flight = false;
    } else {
      // Dropped (deleted or updated meanwhile) or nothing written (started over).
      CHECK(*f != step_outcome::fenced);
    }
    open[s].reset();
  };
  auto begin = [&](uint32_t s) {
    auto rows = w.workers[s]->due(8);
    REQUIRE(rows);
    if (rows->empty())
      return;
    auto row = (*rows)[rng() % rows->size()];
    std::optional<attempt> act;
    bool recounted = false;
    auto b = w.workers[s]->begin(row, &act, &recounted);
    REQUIRE(b);
    REQUIRE(*b != step_outcome::fenced);
    if (*b != step_outcome::done)
      return; // dropped: stale
    auto& m = models.at(row.action_id);
    if (recounted)
      m.in_flight = false;
    if (act) {
      CHECK_FALSE(m.paused);
      ++m.begun;
      m.in_flight = true;
      open[s] = pending{row, *act};
    }
  };

  for (int step = 0; step < 1500; ++step) {
    auto s = static_cast<uint32_t>(rng() % shards);
    auto op = rng() % 13;
    ++ops[op];
    switch (op) {
      case 0: { // create: one, or a few at once (all or none)
        if (rng() % 3 == 0) {
          std::vector<std::pair<std::string, v1::ScheduledActionSpec>> batch;
          std::set<std::string> ids;
          for (auto n = 1 + rng() % 3; n > 0; --n)
            if (auto id = id_of(); ids.insert(id).second)
              batch.emplace_back(id, random_spec(rng, w.now));
          auto r = w.api->create_many(batch);
          if (r) {
            CHECK(*r == batch.size());
            for (auto& b : batch)
              models[b.first] = model{};
          } else {
            CHECK(r.error() == persistence::db_errc::already_exists);
          }
          break;
        }
        auto id = id_of();
        auto r = w.api->create(id, random_spec(rng, w.now));
        if (r)
          models[id] = model{};
        else
          CHECK(r.error() == persistence::db_errc::already_exists);
        break;
      }
      case 1: { // update (half as often as the other ops)
        if (rng() % 2 == 0) {
          --ops[op];
          break;
        }
        auto id = id_of();
        // An update drops the attempt in flight, if any. Whether one is in flight is read from
        // the action itself: an iteration may have recounted it (as interrupted) without
        // acting on the action, which the model cannot see.
        auto before = persistence::get_scheduled_action(w.pool, id);
        REQUIRE(before);
        bool in_flight = *before && (*before)->status().in_flight();
        auto r = w.api->update(id, random_spec(rng, w.now));
        if (r) {
          auto& m = models.at(id);
          if (in_flight)
            ++m.lost;
          m.in_flight = false;
        }
        break;
      }
      case 2: { // delete (a third as often)
        if (rng() % 3 != 0) {
          --ops[op];
          break;
        }
        auto id = id_of();
        REQUIRE(w.api->remove(id));
        models.erase(id);
        break;
      }
      case 3: // moves: one row, or a few in one transaction
        REQUIRE(w.workers[s]->move_one());
        break;
      case 4: {
        auto m = w.workers[s]->move_batch(1 + rng() % 4);
        REQUIRE(m);
        CHECK_FALSE(m->fenced);
        break;
      }
      case 5: // time passes
        w.now += static_cast<int64_t>(rng() % 200);
        break;
      case 6: // begin an attempt (finishing the worker's open one first)
        if (open[s])
          finish(s, rng() % 2 == 0);
        begin(s);
        break;
      case 7:
      case 8: // finish
        if (open[s])
          finish(s, rng() % 3 != 0);
        break;
      case 9: { // crash: the lease taken over at a new epoch, the attempt left in flight
        w.db.scalar("UPDATE shard_leases SET epoch = epoch + 1 WHERE shard = " + std::to_string(s));
        zombies.emplace_back(std::move(w.workers[s]), std::move(open[s]));
        open[s].reset();
        w.workers[s] = w.make_worker(s);
        break;
      }
      case 10: { // a crashed worker wakes up: fenced, writes nothing
        if (zombies.empty())
          break;
        auto& [z, p] = zombies[rng() % zombies.size()];
        auto m = z->move_one();
        REQUIRE(m);
        CHECK(*m == step_outcome::fenced);
        auto mb = z->move_batch(4);
        REQUIRE(mb);
        CHECK(mb->fenced);
        // A whole (batched) iteration: fenced at its first write, nothing carried out.
        auto due_now = z->due(8);
        REQUIRE(due_now);
        auto zi = z->iterate(
          [](const attempt&) {
            FAIL("a fenced worker carried out an action");
            return std::string{};
          },
          0, 8);
        REQUIRE(zi);
        CHECK(zi->fenced == !due_now->empty()); // no due row: nothing to write, nothing fenced
        if (p) {
          auto f = z->finish(p->row, p->at, "");
          REQUIRE(f);
          CHECK(*f == step_outcome::fenced);
        }
        break;
      }
      case 12: { // an operator's verb: pause, resume or run-now (an attempt in flight is
                 // counted as interrupted by it)
        auto id = id_of();
        auto v = static_cast<scheduler::verb>(rng() % 3);
        auto r = w.api->apply(v, id, "tester");
        if (r) {
          if (r->changed)
            models.at(id).in_flight = false;
          models.at(id).paused = r->action.status().paused();
        } else {
          CHECK((r.error() == persistence::db_errc::not_found
                 || r.error() == errc::failed_precondition));
        }
        break;
      }
      default: { // a whole sync iteration
        if (open[s])
          finish(s, true);
        auto it = w.workers[s]->iterate(
          [&](const attempt& a) {
            // begin acted: any earlier attempt of this action was recounted first.
            auto& m = models.at(a.action_id);
            CHECK_FALSE(m.paused);
            ++m.begun;
            m.in_flight = false;
            bool ok = rng() % 4 != 0;
            (ok ? m.ok : m.failed) += 1;
            return ok ? std::string{} : std::string{"boom"};
          },
          64, 64);
        REQUIRE(it);
        CHECK_FALSE(it->fenced);
        break;
      }
    }
    auto bad = w.broken();
    REQUIRE_MESSAGE(bad.empty(), "step " << step << " op " << op << ": " << bad);
  }
  MESSAGE("ops: create " << ops[0] << ", update " << ops[1] << ", delete " << ops[2] << ", moves "
                         << ops[3] + ops[4] << ", begins " << ops[6] << ", crashes " << ops[9]
                         << ", iterations " << ops[11] << ", verbs " << ops[12]);
  CHECK(ops[9] > 0);
  CHECK(w.count("SELECT count(*) FROM scheduled_processing") > 0);

  // Drain: long after everything is due, iterations fire every due action (recounting the
  // attempts the crashes left) and move every incoming row. Three rounds a second apart: an
  // action with a run-now pending besides an overdue occurrence fires the run-now first, and
  // its occurrence (or a retry of it, which waits its back-off after the run-now) later.
  for (uint32_t s = 0; s < shards; ++s)
    if (open[s])
      finish(s, true);
  w.now += 3'600'000;
  auto drain_at = w.now;
  int64_t fired = 0;
  for (uint32_t s = 0; s < 3 * shards; ++s) {
    if (s > 0 && s % shards == 0)
      w.now += 1000;
    auto it = w.workers[s % shards]->iterate(
      [&](const attempt& a) {
        auto& m = models.at(a.action_id);
        CHECK_FALSE(m.paused);
        ++m.begun;
        m.in_flight = false;
        ++m.ok;
        return std::string{};
      },
      100'000, 100'000);
    REQUIRE(it);
    fired += it->fired;
  }
  CHECK(w.broken().empty());
  CHECK(w.count("SELECT count(*) FROM scheduled_incoming") == 0);
  {
    auto late = w.db.scalar("SELECT coalesce(string_agg(action_id, ' '), '') FROM"
                            " scheduled_actions WHERE status_scheduled_at_ms <= "
                            + std::to_string(drain_at));
    std::string why;
    std::istringstream in{late};
    std::string id;
    while (in >> id) {
      auto a = persistence::get_scheduled_action(w.pool, id);
      REQUIRE(a);
      REQUIRE(*a);
      why += id + ": " + (*a)->status().ShortDebugString() + " rows: ";
      auto rows = persistence::queue_rows_of(w.pool, id, (*a)->meta().guid());
      REQUIRE(rows);
      for (auto& r : *rows)
        why += std::string{r.processing ? "processing " : "incoming "} + std::to_string(r.shard)
               + " " + (r.scheduled_at_ms ? std::to_string(*r.scheduled_at_ms) : "parked") + "; ";
    }
    CHECK_MESSAGE(late.empty(), why);
  }
  // Stale rows: every processing row left is current, or stale and not due yet / parked.
  for (uint32_t s = 0; s < shards; ++s)
    REQUIRE(w.workers[s]->sweep());
  CHECK(w.count("SELECT count(*) FROM scheduled_processing p WHERE p.scheduled_at_ms IS NULL"
                " AND NOT EXISTS (SELECT 1 FROM scheduled_actions a WHERE"
                " a.action_id = p.action_id AND a.action_guid = p.action_guid)")
        == 0);

  // Every attempt begun is counted exactly once.
  int64_t interrupted = 0;
  for (auto& [id, m] : models) {
    auto a = persistence::get_scheduled_action(w.pool, id);
    REQUIRE(a);
    REQUIRE(*a);
    auto& st = (*a)->status();
    INFO(id << ": " << st.ShortDebugString() << " begun " << m.begun << " ok " << m.ok << " failed "
            << m.failed << " lost " << m.lost);
    CHECK_FALSE(st.in_flight());
    CHECK(st.successes() == m.ok);
    CHECK(st.total_failures() == m.failed + st.interrupted());
    CHECK(m.begun == m.ok + m.failed + st.interrupted() + m.lost);
    interrupted += st.interrupted();
  }
  MESSAGE("actions " << models.size() << ", fired in the drain " << fired << ", interrupted "
                     << interrupted);
}

TEST_CASE("bad input stores nothing and names the field") {
  world w;
  v1::ScheduledActionSpec bad;
  bad.mutable_http()->set_url("http://127.0.0.1:8080/hook");
  auto r = w.api->create("x1", bad);
  REQUIRE_FALSE(r);
  CHECK(r.error() == errc::invalid_argument);
  CHECK(error_message(r.error()).rfind("spec.http.url:", 0) == 0);
  v1::ScheduledActionSpec none;
  r = w.api->create("x1", none);
  REQUIRE_FALSE(r);
  CHECK(error_message(r.error()).rfind("spec.action:", 0) == 0);
  r = w.api->create("bad id", random_spec(*std::make_unique<std::mt19937>(1), w.now));
  REQUIRE_FALSE(r);
  CHECK(error_message(r.error()).rfind("id:", 0) == 0);
  CHECK(w.count("SELECT count(*) FROM scheduled_actions") == 0);
  CHECK(w.count("SELECT count(*) FROM scheduled_incoming") == 0);
  // An update refused changes nothing either.
  std::mt19937 rng{7};
  auto ok = w.api->create("x1", random_spec(rng, w.now));
  REQUIRE(ok);
  v1::ScheduledActionSpec cron = random_spec(rng, w.now);
  cron.set_cron("* * * * * *");
  auto u = w.api->update("x1", cron);
  REQUIRE_FALSE(u);
  CHECK(error_message(u.error()).rfind("spec.cron:", 0) == 0);
  CHECK(w.db.scalar("SELECT action_guid FROM scheduled_actions") == ok->meta().guid());
  CHECK(w.count("SELECT count(*) FROM scheduled_incoming") == 1);
  auto dup = w.api->create("x1", random_spec(rng, w.now));
  REQUIRE_FALSE(dup);
  CHECK(w.count("SELECT count(*) FROM scheduled_incoming") == 1);
}

TEST_CASE("a bulk create stores all or nothing; a batched move keeps the invariant") {
  world w;
  std::mt19937 rng{11};
  std::vector<std::pair<std::string, v1::ScheduledActionSpec>> batch;
  for (int i = 0; i < 50; ++i)
    batch.emplace_back("b" + std::to_string(i), random_spec(rng, w.now));
  auto bad = batch;
  bad[7].second.mutable_http()->set_url("ftp://example.com/x");
  auto r = w.api->create_many(bad);
  REQUIRE_FALSE(r);
  CHECK(r.error() == errc::invalid_argument);
  CHECK(error_message(r.error()).rfind("actions[7].spec.http.url:", 0) == 0);
  auto twice = batch;
  twice[9].first = "b3";
  r = w.api->create_many(twice);
  REQUIRE_FALSE(r);
  CHECK(error_message(r.error()).rfind("actions[9].id:", 0) == 0);
  CHECK(w.count("SELECT count(*) FROM scheduled_actions") == 0);
  r = w.api->create_many(batch);
  REQUIRE(r);
  CHECK(*r == 50);
  CHECK(w.count("SELECT count(*) FROM scheduled_incoming") == 50);
  CHECK(w.count("SELECT count(DISTINCT shard) FROM scheduled_incoming") > 1);
  // One id already taken: nothing of the batch is stored.
  std::vector<std::pair<std::string, v1::ScheduledActionSpec>> again{
    {"new-1", random_spec(rng, w.now)}, {"b20", random_spec(rng, w.now)}};
  r = w.api->create_many(again);
  REQUIRE_FALSE(r);
  CHECK(r.error() == persistence::db_errc::already_exists);
  CHECK(error_message(r.error()).find("'b20'") != std::string::npos);
  CHECK(w.count("SELECT count(*) FROM scheduled_actions") == 50);
  // Half of them updated: their first rows are stale; batched moves drop those, move the rest.
  for (int i = 0; i < 50; i += 2)
    REQUIRE(w.api->update("b" + std::to_string(i), random_spec(rng, w.now)));
  int64_t moved = 0, dropped = 0;
  for (uint32_t s = 0; s < shards; ++s)
    for (;;) {
      auto m = w.workers[s]->move_batch(7);
      REQUIRE(m);
      REQUIRE_FALSE(m->fenced);
      moved += m->moved;
      dropped += m->dropped;
      if (m->moved + m->dropped == 0)
        break;
    }
  CHECK(moved == 50);
  CHECK(dropped == 25);
  CHECK(w.count("SELECT count(*) FROM scheduled_incoming") == 0);
  CHECK(w.broken().empty());
}

TEST_CASE("a row moved and fired carries its sync iteration's guid; a stale row is dropped") {
  world w;
  std::mt19937 rng{3};
  auto spec = random_spec(rng, w.now);
  spec.clear_cron();
  spec.set_interval_ms(100);
  spec.set_start_at_ms(w.now);
  auto a = w.api->create("s1", spec);
  REQUIRE(a);
  auto b = w.api->update("s1", spec); // a second incoming row; the first is stale now
  REQUIRE(b);
  CHECK(a->meta().guid() != b->meta().guid());
  CHECK(w.count("SELECT count(*) FROM scheduled_incoming") == 2);
  int64_t moved = 0, dropped = 0;
  std::string sync;
  for (uint32_t s = 0; s < shards; ++s) {
    auto& wk = *w.workers[s];
    wk.new_sync();
    for (;;) {
      auto m = wk.move_one();
      REQUIRE(m);
      if (*m == step_outcome::none)
        break;
      if (*m == step_outcome::moved) {
        ++moved;
        sync = wk.sync_guid();
      } else {
        ++dropped;
      }
    }
  }
  CHECK(moved == 1);
  CHECK(dropped == 1);
  CHECK(w.db.scalar("SELECT moved_by_sync FROM scheduled_processing") == sync);
  CHECK(w.db.scalar("SELECT action_guid FROM scheduled_processing") == b->meta().guid());
  auto shard =
    static_cast<uint32_t>(std::stoul(w.db.scalar("SELECT shard FROM scheduled_processing")));
  auto& wk = *w.workers[shard];
  int fired = 0;
  auto it = wk.iterate(
    [&](const attempt& at) {
      ++fired;
      CHECK(at.idempotency_key == "s1/" + std::to_string(w.now));
      // Rescheduled to the retry time before acting.
      CHECK(w.db.scalar("SELECT scheduled_at_ms FROM scheduled_processing")
            == std::to_string(w.now + 20));
      return std::string{};
    },
    10, 10);
  REQUIRE(it);
  CHECK(fired == 1);
  CHECK(w.db.scalar("SELECT last_reschedule_by_sync FROM scheduled_processing") == wk.sync_guid());
  CHECK(w.db.scalar("SELECT scheduled_at_ms FROM scheduled_processing")
        == std::to_string(w.now + 100));
}

TEST_CASE("a finished action's row is parked; once stale, the sweep deletes it") {
  world w;
  v1::ScheduledActionSpec once;
  once.set_start_at_ms(w.now);
  once.mutable_kafka()->set_topic("t");
  auto a = w.api->create("p1", once);
  REQUIRE(a);
  auto shard =
    static_cast<uint32_t>(std::stoul(w.db.scalar("SELECT shard FROM scheduled_incoming")));
  auto& wk = *w.workers[shard];
  auto it = wk.iterate([](const attempt&) { return std::string{}; }, 10, 10);
  REQUIRE(it);
  CHECK(it->fired == 1);
  CHECK(w.db.scalar("SELECT count(*) FROM scheduled_processing WHERE scheduled_at_ms IS NULL")
        == "1");
  auto swept = wk.sweep();
  REQUIRE(swept);
  CHECK(*swept == 0); // current: kept (the invariant's one row)
  once.set_start_at_ms(w.now + 1000);
  REQUIRE(w.api->update("p1", once)); // the parked row is stale now
  swept = wk.sweep();
  REQUIRE(swept);
  CHECK(*swept == 1);
  CHECK(w.broken().empty());
  // A worker whose lease moved on sweeps nothing.
  w.db.scalar("UPDATE shard_leases SET epoch = epoch + 1 WHERE shard = " + std::to_string(shard));
  CHECK(*wk.sweep() == -1);
}

TEST_CASE("a worker whose lease is at its epoch but names another node is fenced: the owner is "
          "compared too (ADR 0023 §6)") {
  world w;
  v1::ScheduledActionSpec once;
  once.set_start_at_ms(w.now);
  once.mutable_kafka()->set_topic("t");
  REQUIRE(w.api->create("o1", once));
  auto shard =
    static_cast<uint32_t>(std::stoul(w.db.scalar("SELECT shard FROM scheduled_incoming")));
  auto& wk = *w.workers[shard];
  // The epoch issued again to another node (a failover lost the bump): only the owner differs.
  w.db.scalar("UPDATE shard_leases SET owner = 'n2' WHERE shard = " + std::to_string(shard));
  auto m = wk.move_one();
  REQUIRE(m);
  CHECK(*m == step_outcome::fenced);
  auto mb = wk.move_batch(4);
  REQUIRE(mb);
  CHECK(mb->fenced);
  CHECK(w.count("SELECT count(*) FROM scheduled_incoming") == 1);
  CHECK(*wk.sweep() == -1);
  // This node's again: the row moves.
  w.db.scalar("UPDATE shard_leases SET owner = 'n1' WHERE shard = " + std::to_string(shard));
  m = wk.move_one();
  REQUIRE(m);
  CHECK(*m == step_outcome::moved);
  CHECK(w.broken().empty());
}

namespace {

/// One iteration of every shard's worker; the attempts fired, by idempotency key.
std::vector<std::string> iterate_all(world& w, const std::string& error = {}) {
  std::vector<std::string> keys;
  for (auto& wk : w.workers) {
    auto it = wk->iterate(
      [&](const attempt& at) {
        keys.push_back(at.idempotency_key + (at.run_now ? " run-now" : ""));
        return error;
      },
      100, 100);
    REQUIRE(it);
  }
  return keys;
}

} // namespace

TEST_CASE("pause, resume and run-now: each a new guid and an incoming row; the schedule kept") {
  world w;
  for (auto& wk : w.workers)
    wk->set_node("n1");
  v1::ScheduledActionSpec spec;
  spec.set_start_at_ms(w.now);
  spec.set_interval_ms(1000);
  spec.mutable_kafka()->set_topic("t");
  auto a = w.api->create("v1", spec);
  REQUIRE(a);
  CHECK(iterate_all(w) == std::vector<std::string>{"v1/" + std::to_string(t0)});
  auto incoming = w.count("SELECT count(*) FROM scheduled_incoming");

  // Pause: a new guid, one incoming row more, no queue row deleted; nothing fires.
  auto p = w.api->apply(scheduler::verb::pause, "v1", "alice");
  REQUIRE(p);
  CHECK(p->changed);
  CHECK(p->action.meta().guid() != a->meta().guid());
  CHECK(p->action.status().paused());
  CHECK(p->action.status().paused_by() == "alice");
  CHECK(w.count("SELECT count(*) FROM scheduled_incoming") == incoming + 1);
  CHECK(w.broken().empty());
  CHECK(w.db.scalar("SELECT paused FROM scheduled_actions") == "t");
  auto again = w.api->apply(scheduler::verb::pause, "v1", "alice");
  REQUIRE(again);
  CHECK_FALSE(again->changed); // paused already: nothing written
  CHECK(again->action.meta().guid() == p->action.meta().guid());
  // A run-now of a paused action is refused.
  auto refused = w.api->apply(scheduler::verb::run_now, "v1", "alice");
  REQUIRE_FALSE(refused);
  CHECK(refused.error() == errc::failed_precondition);
  for (int i = 0; i < 5; ++i) {
    w.now += 1000;
    CHECK(iterate_all(w).empty());
    CHECK(w.broken().empty());
  }
  CHECK(w.db.scalar("SELECT count(*) FROM scheduled_processing WHERE action_guid = '"
                    + p->action.meta().guid() + "' AND scheduled_at_ms IS NULL")
        == "1"); // parked while paused

  // Resume: the occurrences missed while paused fire once, at once.
  auto r = w.api->apply(scheduler::verb::resume, "v1", "bob");
  REQUIRE(r);
  CHECK(r->changed);
  CHECK_FALSE(r->action.status().paused());
  auto fired = iterate_all(w);
  CHECK(fired == std::vector<std::string>{"v1/" + std::to_string(t0 + 1000)});
  CHECK(iterate_all(w).empty());
  CHECK(w.broken().empty());

  // Run-now: one attempt now, outside the schedule (next occurrence unchanged).
  w.now += 10;
  auto before = w.api->apply(scheduler::verb::run_now, "v1", "carol");
  REQUIRE(before);
  CHECK(before->changed);
  auto scheduled_at = before->action.status().scheduled_at_ms();
  fired = iterate_all(w);
  CHECK(fired == std::vector<std::string>{"v1/" + std::to_string(w.now) + " run-now"});
  auto after = persistence::get_scheduled_action(w.pool, "v1");
  REQUIRE(after);
  REQUIRE(*after);
  CHECK((*after)->status().scheduled_at_ms() == scheduled_at);
  CHECK((*after)->status().run_now_at_ms() == 0);
  CHECK((*after)->status().successes() == 3);
  CHECK(w.broken().empty());
  w.now = scheduled_at;
  CHECK(iterate_all(w) == std::vector<std::string>{"v1/" + std::to_string(scheduled_at)});

  // The attempt log: newest first, with the run-now marked and the node named.
  auto log = persistence::attempts_of(w.pool, "v1", 100);
  REQUIRE(log);
  REQUIRE(log->size() == 4);
  CHECK(log->at(0).occurrence_ms == scheduled_at);
  CHECK(log->at(1).run_now);
  CHECK(log->at(1).outcome == "ok");
  CHECK(log->at(1).node == "n1");
  CHECK(log->at(3).occurrence_ms == t0);
}

TEST_CASE("the attempt log: every outcome, bounded per action, recounts logged, reaped with it") {
  world w;
  v1::ScheduledActionSpec spec;
  spec.set_start_at_ms(w.now);
  spec.set_interval_ms(100);
  spec.mutable_retry()->set_max_attempts(2);
  spec.mutable_retry()->set_backoff_ms(10);
  spec.mutable_kafka()->set_topic("t");
  REQUIRE(w.api->create("log1", spec));
  // Failures: attempt 1 failed, attempt 2 gave up; then successes past the bound.
  for (int i = 0; i < 30; ++i) {
    iterate_all(w, i < 2 ? "HTTP 503" : "");
    w.now += 100;
  }
  auto log = persistence::attempts_of(w.pool, "log1", 100);
  REQUIRE(log);
  CHECK(static_cast<int64_t>(log->size()) == persistence::attempts_kept);
  CHECK(w.count("SELECT count(*) FROM scheduled_attempts") == persistence::attempts_kept);
  CHECK(log->front().outcome == "ok");
  for (size_t i = 1; i < log->size(); ++i)
    CHECK(log->at(i - 1).at_ms >= log->at(i).at_ms);

  REQUIRE(w.api->create("log2", spec));
  iterate_all(w);
  w.now += 100;
  iterate_all(w, "HTTP 503");
  log = persistence::attempts_of(w.pool, "log2", 100);
  REQUIRE(log);
  REQUIRE(log->size() == 2);
  CHECK(log->at(0).outcome == "failed");
  CHECK(log->at(0).error == "HTTP 503");
  CHECK(log->at(0).attempt == 1);
  w.now += 100;
  iterate_all(w, "HTTP 503");
  log = persistence::attempts_of(w.pool, "log2", 100);
  REQUIRE(log);
  CHECK(log->at(0).outcome == "gave_up");
  CHECK(log->at(0).attempt == 2);

  // An attempt begun and never finished (a crash): the next begin logs it as interrupted.
  auto shard = static_cast<uint32_t>(std::stoul(
    w.db.scalar("SELECT shard FROM scheduled_processing WHERE action_id = 'log2' AND action_guid ="
                " (SELECT action_guid FROM scheduled_actions WHERE action_id = 'log2')")));
  auto& wk = *w.workers[shard];
  w.now += 100;
  auto rows = wk.due(10);
  REQUIRE(rows);
  auto row = std::find_if(rows->begin(), rows->end(),
                          [](const due_row& r) { return r.action_id == "log2"; });
  REQUIRE(row != rows->end());
  std::optional<attempt> act;
  REQUIRE(wk.begin(*row, &act));
  REQUIRE(act);
  w.workers[shard] = w.make_worker(shard); // the worker died; a new one (same lease) goes on
  w.now += 1000;
  iterate_all(w);
  log = persistence::attempts_of(w.pool, "log2", 100);
  REQUIRE(log);
  REQUIRE(log->size() >= 2);
  CHECK(log->at(1).outcome == "interrupted");
  CHECK(log->at(1).attempt == act->number);
  CHECK(log->at(1).occurrence_ms == act->scheduled_at_ms);
  CHECK(log->at(0).outcome == "ok");

  // Deleted with the action.
  REQUIRE(w.api->remove("log1"));
  REQUIRE(w.api->remove("log2"));
  CHECK(w.count("SELECT count(*) FROM scheduled_attempts") == 0);
}

TEST_CASE("shard groups: an action, its queue rows and its attempts stay in its id's home "
          "group's database; lists merge the groups in id order (ADR 0023)") {
  world a; // group 0: its workers of shards 0-1 are used
  world b; // group 1: its workers of shards 2-3
  auto where = std::make_shared<testing::two_groups>(a.pool, b.pool, shards, 2);
  int64_t now = t0;
  scheduler api{where, a.opts, [&] { return now; }, "n1"};
  auto worker_of = [&](uint32_t s) -> worker_steps& {
    return s < 2 ? *a.workers[s] : *b.workers[s];
  };
  auto tick = [&](int64_t ms) { now = a.now = b.now = now + ms; };
  auto spec_of = [&](int64_t interval_ms) {
    v1::ScheduledActionSpec s;
    s.set_start_at_ms(now);
    s.set_interval_ms(interval_ms);
    s.mutable_kafka()->set_topic("t");
    return s;
  };
  std::vector<std::string> ids;
  for (int i = 0; i < 20; ++i) {
    ids.push_back("g-" + std::to_string(i));
    REQUIRE(api.create(ids.back(), spec_of(100)));
  }
  std::vector<std::pair<std::string, v1::ScheduledActionSpec>> batch;
  for (int i = 20; i < 30; ++i) {
    ids.push_back("g-" + std::to_string(i));
    batch.emplace_back(ids.back(), spec_of(100));
  }
  auto many = api.create_many(batch);
  REQUIRE(many);
  CHECK(*many == 10);
  // A taken id in a batch spanning both groups: the error names it.
  auto again = api.create_many({{"g-new", spec_of(100)}, {"g-3", spec_of(100)}});
  REQUIRE_FALSE(again);
  CHECK(again.error() == persistence::db_errc::already_exists);
  CHECK_MESSAGE(error_message(again.error()).find("'g-3'") != std::string::npos,
                error_message(again.error()));
  REQUIRE(api.remove("g-new")); // stored or not, depending on the groups' order: gone now

  // Each action where its id's home shard's group is, its incoming row on that group's shards.
  auto in_group = [&](const std::string& id) { return gost::shard_of(id, shards) < 2 ? 0 : 1; };
  auto rows_of = [&](world& w, const std::string& id) {
    return w.count("SELECT count(*) FROM scheduled_actions WHERE action_id = '" + id + "'");
  };
  int in_b = 0;
  for (auto& id : ids) {
    auto g = in_group(id);
    in_b += g;
    CHECK_MESSAGE(rows_of(a, id) == (g == 0 ? 1 : 0), id);
    CHECK_MESSAGE(rows_of(b, id) == (g == 1 ? 1 : 0), id);
    CHECK(&api.database_of(id) == (g == 0 ? &a.pool : &b.pool));
  }
  CHECK(in_b > 0);
  CHECK(in_b < 30);
  auto astray = [&] {
    return a.count("SELECT count(*) FROM scheduled_incoming WHERE shard >= 2")
           + a.count("SELECT count(*) FROM scheduled_processing WHERE shard >= 2")
           + a.count("SELECT count(*) FROM scheduled_attempts WHERE shard >= 2")
           + b.count("SELECT count(*) FROM scheduled_incoming WHERE shard < 2")
           + b.count("SELECT count(*) FROM scheduled_processing WHERE shard < 2")
           + b.count("SELECT count(*) FROM scheduled_attempts WHERE shard < 2");
  };
  CHECK(astray() == 0);

  // Changes reach the action in its database: updates, a pause, a delete.
  for (int i = 0; i < 30; i += 6)
    REQUIRE(api.update(ids[i], spec_of(200)));
  auto paused = api.apply(scheduler::verb::pause, ids[1], "tester");
  REQUIRE(paused);
  CHECK(paused->changed);
  auto gone = api.remove(ids[2]);
  REQUIRE(gone);
  CHECK(*gone);
  CHECK(rows_of(a, ids[2]) + rows_of(b, ids[2]) == 0);
  CHECK(a.broken().empty());
  CHECK(b.broken().empty());

  // Lists: four a page, every live action once, in id order across both databases.
  std::vector<std::string> listed;
  std::string after;
  for (int page = 0; page < 20; ++page) {
    auto p = api.list(after, 4, {});
    REQUIRE(p);
    for (auto& x : *p)
      listed.push_back(x.meta().id());
    if (p->size() < 4)
      break;
    after = p->back().meta().id();
  }
  auto live = ids;
  live.erase(live.begin() + 2);
  std::sort(live.begin(), live.end());
  CHECK(listed == live);
  persistence::scheduled_filter only_paused;
  only_paused.paused = true;
  auto p = api.list("", 10, only_paused);
  REQUIRE(p);
  REQUIRE(p->size() == 1);
  CHECK(p->front().meta().id() == ids[1]);

  // Each group's workers fire the actions of their database: every live action but the paused
  // one fires, and the attempts are logged in the action's database under its group's shards.
  std::map<std::string, int> fired;
  for (int round = 0; round < 4; ++round) {
    tick(250);
    for (uint32_t s = 0; s < shards; ++s) {
      auto it = worker_of(s).iterate(
        [&](const attempt& x) {
          CHECK_MESSAGE(in_group(x.action_id) == (s < 2 ? 0 : 1), x.action_id << " on " << s);
          ++fired[x.action_id];
          return std::string{};
        },
        100, 100);
      REQUIRE(it);
      CHECK_FALSE(it->fenced);
    }
  }
  for (auto& id : live)
    CHECK_MESSAGE((fired[id] > 0) == (id != ids[1]), id << " fired " << fired[id]);
  CHECK(astray() == 0);
  CHECK(a.broken().empty());
  CHECK(b.broken().empty());
  CHECK(a.count("SELECT count(*) FROM scheduled_attempts") > 0);
  CHECK(b.count("SELECT count(*) FROM scheduled_attempts") > 0);
}
