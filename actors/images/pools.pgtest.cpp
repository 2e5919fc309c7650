// The image pools on the real PostgreSQL and a local HTTP server: every queued task of the
// partitions a node serves is computed by its function's pool, several at once, and nothing
// of a partition it does not serve.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include <vips/vips8>

#include "gost/core/protocol.hpp"
#include "gost/images/ask.hpp"
#include "gost/images/pools.hpp"
#include "gost/persistence/pg_pool.hpp"
#include "gost/testing/http_server.hpp"
#include "gost/testing/migrated_db.hpp"
#include "gost/testing/process.hpp"
#include "gost/testing/two_groups.hpp"
#include "gost/v1/images.pb.h"

using namespace gost;
using namespace gost::images;
using namespace std::chrono_literals;
using testing::eventually;
using testing::http_server;

namespace {

std::string png(int w, int h) {
  init();
  auto img = vips::VImage::black(w, h, vips::VImage::option()->set("bands", 3))
               .new_from_image({30, 60, 90})
               .cast(VIPS_FORMAT_UCHAR);
  void* buf = nullptr;
  size_t size = 0;
  img.write_to_buffer(".png", &buf, &size);
  std::string out(static_cast<const char*>(buf), size);
  g_free(buf);
  return out;
}

caf::actor_system_config& two_threads(caf::actor_system_config& cfg) {
  register_core_types(cfg);
  cfg.set("scheduler.max-threads", size_t{2});
  return cfg;
}

/// A migrated database, an actor system and pool options on them (images from loopback
/// allowed, a fast poll); the system stops before the database goes.
struct pools_env {
  testing::migrated_db data;
  caf::actor_system_config cfg;
  caf::actor_system sys{two_threads(cfg)};
  pools_options opts;
  explicit pools_env(int connections) : data{connections} {
    opts.where = persistence::one_database(data.pool, 8);
    opts.work.allow_private = true;
    opts.poll = 20ms;
  }
  /// Stops the pools and waits until every actor is gone: a feeder on its own thread may be in a
  /// query, which must end before a database the test made (declared after `env`) goes away.
  void stop(const std::map<function, image_feeder_actor>& actors) {
    for (auto& [fn, a] : actors)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    sys.await_all_actors_done();
  }
};

} // namespace

TEST_CASE("the pools compute every task of the partitions served here, several at once") {
  pools_env env{3};
  auto& db = env.data.db;
  auto& pool = env.data.pool;
  auto& sys = env.sys;
  auto& opts = env.opts;

  auto image = png(320, 240);
  std::mutex m;
  int running = 0, most = 0;
  http_server srv{[&](const http_server::call&) {
    {
      std::lock_guard<std::mutex> g{m};
      most = std::max(most, ++running);
    }
    std::this_thread::sleep_for(5ms); // a slow image server: the pool overlaps fetches
    std::lock_guard<std::mutex> g{m};
    --running;
    return http_server::reply{200, image};
  }};

  // 120 ratio and 40 colour tasks over 8 partitions; the node serves partitions 0..5.
  std::vector<persistence::image_request> reqs;
  std::vector<task_key> served, elsewhere;
  for (int i = 0; i < 160; ++i) {
    auto fn = i < 120 ? function::ratio : function::main_color;
    auto t = make_task(fn, srv.url("/p.png?n=" + std::to_string(i)));
    REQUIRE(t);
    persistence::image_request r;
    r.key = t->result_key();
    r.task = {to_string(fn), t->partition(8), t->args, 0, 3'600'000, 0, {}};
    r.pending_ttl_ms = 60'000;
    reqs.push_back(r);
    (r.task.partition < 6 ? served : elsewhere).push_back(*t);
  }
  REQUIRE(persistence::enqueue_image_tasks(pool, reqs));
  REQUIRE_FALSE(elsewhere.empty());

  opts.workers = {{function::ratio, 4}, {function::main_color, 2}};
  opts.partitions = [] { return std::vector<uint32_t>{0, 1, 2, 3, 4, 5}; };
  auto actors = spawn_image_pools(sys, opts);
  CHECK(actors.size() == 2);

  auto left = [&] {
    return std::stoi(db.scalar("SELECT count(*) FROM image_tasks WHERE partition < 6"));
  };
  CHECK_MESSAGE(eventually(30s, [&] { return left() == 0; }), left(), " tasks left");
  for (auto& t : served) {
    auto rs = persistence::find_image_results(pool, {t.result_key()});
    REQUIRE(rs);
    REQUIRE(rs->size() == 1);
    CHECK(rs->front().status == "done");
  }
  // Partitions 6 and 7 are another node's: untouched.
  CHECK(std::stoul(db.scalar("SELECT count(*) FROM image_tasks")) == elsewhere.size());
  CHECK(most > 1);
  env.stop(actors);
}

TEST_CASE("foreign tasks (the Kafka queue's) run in the pool once each, skipped when answered") {
  pools_env env{3};
  auto& db = env.data.db;
  auto& pool = env.data.pool;
  auto& sys = env.sys;
  auto& opts = env.opts;

  auto image = png(64, 32);
  std::mutex m;
  std::map<std::string, int> fetched;
  http_server srv{[&](const http_server::call& c) {
    {
      std::lock_guard<std::mutex> g{m};
      ++fetched[c.path];
    }
    if (c.path == "/busy.png")
      return http_server::reply{503, "busy"};
    if (c.path == "/slow.png") // still running when its duplicate comes
      std::this_thread::sleep_for(500ms);
    return http_server::reply{200, image};
  }};
  auto fetches = [&](const std::string& path) {
    std::lock_guard<std::mutex> g{m};
    return fetched[path];
  };
  auto foreign = [&](const std::string& path, int64_t asked_at) {
    auto t = make_task(function::ratio, srv.url(path));
    REQUIRE(t);
    persistence::image_task x{
      to_string(function::ratio), t->partition(8), t->args, 0, 60'000, asked_at, {}};
    x.in_table = false;
    return x;
  };
  auto pending = [&](const std::string& path) {
    auto t = make_task(function::ratio, srv.url(path));
    REQUIRE(t);
    persistence::image_request r;
    r.key = t->result_key();
    r.task = {to_string(function::ratio), t->partition(8), t->args, 0, 60'000, 0, {}};
    r.pending_ttl_ms = 60'000;
    auto asked = persistence::write_image_pending(pool, {r});
    REQUIRE(asked);
    return asked->asked_at_us;
  };

  opts.work.retry_base = 60s; // a retry stays queued for the test to see
  opts.workers = {{function::ratio, 2}};
  opts.partitions = [] { return std::vector<uint32_t>{}; }; // the PostgreSQL queue: none here
  auto feeders = spawn_image_pools(sys, opts);
  REQUIRE(feeders.count(function::ratio) == 1);
  auto feeder = feeders.at(function::ratio);

  // 12 distinct tasks (more than the pool's 4 slots) and 10 copies of one: each fetched once.
  std::vector<persistence::image_task> batch;
  for (int i = 0; i < 12; ++i) {
    auto path = "/d" + std::to_string(i) + ".png";
    batch.push_back(foreign(path, pending(path)));
  }
  auto dup_asked = pending("/dup.png");
  for (int i = 0; i < 10; ++i)
    batch.push_back(foreign("/dup.png", dup_asked));
  auto busy = foreign("/busy.png", pending("/busy.png"));
  batch.push_back(busy);
  auto first = run_foreign_tasks(sys, feeder, batch, 30s);
  REQUIRE_MESSAGE(first, caf::to_string(first.error()));
  CHECK(first->run == 14);
  CHECK(first->skipped == 9);
  CHECK(fetches("/dup.png") == 1);
  for (int i = 0; i < 12; ++i) {
    auto t = make_task(function::ratio, srv.url("/d" + std::to_string(i) + ".png"));
    auto rs = persistence::find_image_results(pool, {t->result_key()});
    REQUIRE(rs);
    REQUIRE(rs->size() == 1);
    CHECK(rs->front().status == "done");
  }
  // The recoverable failure is a task of the PostgreSQL queue now, with its back-off.
  CHECK(db.scalar("SELECT attempts FROM image_tasks WHERE args = '" + busy.args + "'") == "1");

  // The same tasks delivered again (Kafka's at least once): answered since, so skipped; one
  // asked again after its result (compute) runs.
  auto again = batch;
  again.push_back(foreign("/d0.png", pending("/d0.png")));
  auto second = run_foreign_tasks(sys, feeder, again, 30s);
  REQUIRE_MESSAGE(second, caf::to_string(second.error()));
  CHECK(second->run == 2); // d0 asked again, and busy (its status is still pending)
  CHECK(second->skipped == again.size() - 2);
  CHECK(fetches("/d0.png") == 2);
  CHECK(fetches("/d1.png") == 1);
  CHECK(fetches("/dup.png") == 1);
  CHECK(db.scalar("SELECT attempts FROM image_tasks WHERE args = '" + busy.args + "'") == "2");

  // Two batches in flight with the same task (two nodes asked at once, in consecutive
  // batches): the second is answered with the first's computation.
  auto slow_asked = pending("/slow.png");
  std::promise<caf::expected<foreign_counts>> first_done;
  run_foreign_tasks_async(sys, feeder, {foreign("/slow.png", slow_asked)}, 30s,
                          [&](caf::expected<foreign_counts> c) { first_done.set_value(c); });
  REQUIRE(eventually(10s, [&] { return fetches("/slow.png") == 1; })); // running
  auto follower = run_foreign_tasks(sys, feeder, {foreign("/slow.png", slow_asked)}, 30s);
  REQUIRE_MESSAGE(follower, caf::to_string(follower.error()));
  CHECK(follower->run == 0);
  CHECK(follower->skipped == 1);
  auto first_counts = first_done.get_future().get();
  REQUIRE(first_counts);
  CHECK(first_counts->run == 1);
  CHECK(fetches("/slow.png") == 1);
  env.stop(feeders);
}

TEST_CASE("a feeder told to drain answers its foreign batches at once and refuses new ones") {
  pools_env env{2};
  auto& sys = env.sys;
  auto& opts = env.opts;
  http_server srv{[&](const http_server::call&) { return http_server::reply{200, {}, {}, true}; }};

  opts.work.fetch_timeout = 2s;
  opts.workers = {{function::ratio, 1}};
  opts.partitions = [] { return std::vector<uint32_t>{}; };
  auto feeders = spawn_image_pools(sys, opts);
  auto feeder = feeders.at(function::ratio);
  auto task = [&](int i) {
    auto t = make_task(function::ratio, srv.url("/hang.png?n=" + std::to_string(i)));
    REQUIRE(t);
    persistence::image_task x{
      to_string(function::ratio), t->partition(8), t->args, 0, 60'000, 1, {}};
    x.in_table = false;
    return x;
  };
  // Five tasks on a pool of one (two slots): two fetch (and hang), three wait.
  std::vector<persistence::image_task> batch;
  for (int i = 0; i < 5; ++i)
    batch.push_back(task(i));
  caf::expected<foreign_counts> got{foreign_counts{}};
  std::atomic<bool> returned{false};
  std::thread waiter{[&] {
    got = run_foreign_tasks(sys, feeder, batch, 60s);
    returned = true;
  }};
  REQUIRE(eventually(10s, [&] { return srv.requests() > 0; }));
  auto asked = std::chrono::steady_clock::now();
  caf::anon_send(feeder, drain_atom_v);
  CHECK(eventually(1s, [&] { return returned.load(); }));
  waiter.join();
  CHECK(std::chrono::steady_clock::now() - asked < 1500ms); // not the fetches' 2 s
  CHECK_FALSE(got);
  auto refused = run_foreign_tasks(sys, feeder, {task(9)}, 60s);
  CHECK_FALSE(refused);
  env.stop(feeders);
}

TEST_CASE("an idle feeder sleeps (images.poll_idle); a wake starts tasks queued meanwhile at "
          "once") {
  pools_env env{2};
  auto& db = env.data.db;
  auto& pool = env.data.pool;
  auto& opts = env.opts;
  // The first look is at the start; finding nothing, the next would be 30 s later.
  opts.poll = 30s;
  opts.poll_idle = 600s;
  opts.workers = {{function::ratio, 2}};
  opts.partitions = [] { return std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7}; };
  auto image = png(64, 48);
  http_server srv{[&](const http_server::call&) { return http_server::reply{200, image}; }};
  auto actors = spawn_image_pools(env.sys, opts);
  REQUIRE(actors.size() == 1);
  auto feeder = actors.at(function::ratio);
  // The feeder's first look is done once it answers a message sent after it (its mailbox is
  // in order): a foreign batch of nothing.
  {
    caf::scoped_actor self{env.sys};
    self->request(feeder, 10s, run_atom_v, foreign_tasks{})
      .receive([](foreign_counts) {},
               [](caf::error& err) { FAIL("the feeder did not answer: " << caf::to_string(err)); });
  }
  auto t = make_task(function::ratio, srv.url("/woken.png"));
  REQUIRE(t);
  persistence::image_request r;
  r.key = t->result_key();
  r.task = {to_string(function::ratio), t->partition(8), t->args, 0, 3'600'000, 0, {}};
  r.pending_ttl_ms = 60'000;
  REQUIRE(persistence::enqueue_image_tasks(pool, {r}));
  caf::anon_send(feeder, wake_atom_v);
  CHECK(eventually(15s, [&] { return db.scalar("SELECT count(*) FROM image_tasks") == "0"; }));
  auto rs = persistence::find_image_results(pool, {t->result_key()});
  REQUIRE(rs);
  REQUIRE(rs->size() == 1);
  CHECK(rs->front().status == "done");
  env.stop(actors);
}

TEST_CASE("shard groups: a partition's tasks and results stay in its group's database; the pools "
          "take and store in each (ADR 0023)") {
  pools_env env{3}; // group 0's database, and the actor system
  testing::migrated_db other{3};
  auto where = std::make_shared<testing::two_groups>(env.data.pool, other.pool, 8, 4);
  auto image = png(80, 40);
  http_server srv{[&](const http_server::call&) { return http_server::reply{200, image}; }};

  // 40 asks: each miss queued in its partition's group's database, answered PENDING.
  std::vector<image_ask> asks;
  for (int i = 0; i < 40; ++i) {
    auto t = make_task(function::ratio, srv.url("/g.png?n=" + std::to_string(i)));
    REQUIRE(t);
    asks.push_back({*t, 3'600'000, false, false});
  }
  auto ask = [&] {
    std::vector<v1::ImageResponse> out(asks.size());
    std::vector<v1::ImageResponse*> ptrs;
    for (auto& o : out)
      ptrs.push_back(&o);
    auto err = ask_images(*where, asks, ptrs);
    REQUIRE_MESSAGE(!err, caf::to_string(err));
    return out;
  };
  int in_b = 0;
  for (auto& r : ask())
    CHECK(r.status() == v1::IMAGE_STATUS_PENDING);
  for (auto& a : asks) {
    auto p = a.task.partition(8);
    in_b += p >= 4 ? 1 : 0;
    auto q = "SELECT count(*) FROM image_tasks WHERE args = '" + a.task.args + "'";
    CHECK(env.data.db.scalar(q) == (p < 4 ? "1" : "0"));
    CHECK(other.db.scalar(q) == (p < 4 ? "0" : "1"));
  }
  CHECK(in_b > 0);
  CHECK(in_b < 40);

  // One node serving every partition: its pools take from both databases and store each
  // result where its task was.
  env.opts.where = where;
  env.opts.workers = {{function::ratio, 2}};
  env.opts.partitions = [] { return std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7}; };
  auto actors = spawn_image_pools(env.sys, env.opts);
  auto left = [&] {
    return std::stoi(env.data.db.scalar("SELECT count(*) FROM image_tasks"))
           + std::stoi(other.db.scalar("SELECT count(*) FROM image_tasks"));
  };
  CHECK_MESSAGE(eventually(30s, [&] { return left() == 0; }), left(), " tasks left");
  CHECK(std::stoi(env.data.db.scalar("SELECT count(*) FROM image_results WHERE status = 'done'"))
        == 40 - in_b);
  CHECK(std::stoi(other.db.scalar("SELECT count(*) FROM image_results WHERE status = 'done'"))
        == in_b);
  // Asked again: every answer DONE, read from its group's database.
  for (auto& r : ask())
    CHECK(r.status() == v1::IMAGE_STATUS_DONE);
  env.stop(actors);
}

TEST_CASE("gost_result_partition in SQL (migration 0030, which a move of a part of a group "
          "selects results by) agrees with task_key::partition") {
  testing::migrated_db m{1};
  for (int i = 0; i < 200; ++i) {
    auto t = make_task(i % 2 == 0 ? function::ratio : function::main_color,
                       "https://img.example/p" + std::to_string(i) + ".png");
    REQUIRE(t);
    for (uint32_t n : {1u, 8u, 64u, 1000u}) {
      auto sql =
        "SELECT gost_result_partition('" + t->result_key() + "', " + std::to_string(n) + ")";
      REQUIRE_MESSAGE(m.db.scalar(sql) == std::to_string(t->partition(n)), t->result_key(), " mod ",
                      n);
    }
  }
}
