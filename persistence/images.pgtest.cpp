// The image functions' queue and results (migration 0016) on the real PostgreSQL: identical
// requests are one task (a stale miss queued after its task was computed too), taken oldest first
// per function and partition, invisible while taken and visible again after the timeout, never
// taken twice at once by two takers; finishing stores the result and deletes the task in one
// transaction; results expire and are reaped.
#include <doctest/doctest.h>

#include <mutex>
#include <set>
#include <thread>

#include "gost/persistence/images/images.hpp"
#include "pg_fixture.hpp"

using namespace gost::persistence;
using namespace std::chrono_literals;

namespace {

image_request request(const std::string& fn, uint32_t partition, const std::string& url,
                      int64_t ttl_ms = 60'000) {
  image_request r;
  r.key = fn + ":" + url; // the key's derivation is gost_images'; any unique text does here
  r.task = {fn, partition, url, 0, ttl_ms, 0, {}};
  r.pending_ttl_ms = 60'000;
  return r;
}

image_result done(const image_request& r, std::string value) {
  image_result x;
  x.key = r.key;
  x.status = "done";
  x.value = std::move(value);
  return x;
}

/// The queue's waits passed without waiting: every task's `due_at` (a taker's visibility
/// timeout, a retry's back-off) moved two hours back, as if the clock had moved on.
void tasks_wait_out(migrated_db& m) {
  m.db.scalar("UPDATE image_tasks SET due_at = due_at - interval '2 hours'");
}

/// The TTL of the result of `key` passed without waiting: its `expires_at` moved two hours back.
void result_expires(migrated_db& m, const std::string& key) {
  m.db.scalar("UPDATE image_results SET expires_at = expires_at - interval '2 hours' WHERE"
              " result_key = '"
              + key + "'");
}

std::string status_of(pg_pool& pool, const std::string& key) {
  auto rs = find_image_results(pool, {key});
  REQUIRE(rs);
  return rs->empty() ? "missing" : rs->front().status;
}

} // namespace

TEST_CASE("a hundred identical requests are one task, with one pending status") {
  migrated_db m;
  size_t added = 0;
  for (int i = 0; i < 100; ++i) {
    auto n = enqueue_image_tasks(m.pool, {request("ratio", 3, "http://img/a.jpg")});
    REQUIRE(n);
    added += *n;
  }
  // Duplicates inside one call too.
  std::vector<image_request> batch(50, request("ratio", 3, "http://img/a.jpg"));
  batch.push_back(request("ratio", 3, "http://img/b.jpg"));
  auto n = enqueue_image_tasks(m.pool, batch);
  REQUIRE(n);
  added += *n;
  CHECK(added == 2);
  CHECK(m.db.scalar("SELECT count(*) FROM image_tasks") == "2");
  CHECK(status_of(m.pool, "ratio:http://img/a.jpg") == "pending");
  auto counts = count_image_tasks(m.pool);
  REQUIRE(counts);
  REQUIRE(counts->size() == 1);
  CHECK(counts->front() == std::pair<std::string, int64_t>{"ratio", 2});
}

TEST_CASE("a miss queued after its task was computed queues nothing: one task per ask wave") {
  // Issue 27: 16 clients asking Ratio of one new URL at once sometimes saw two downloads. Two
  // asks both read "no result"; the first queues the task, a feeder takes it and stores the
  // result (deleting the task row) before the second ask's enqueue runs — which then found no
  // task row to merge with and queued a second computation. The steps, interleaved explicitly:
  migrated_db m;
  auto a = request("ratio", 4, "http://img/new.jpg");
  CHECK(find_image_results(m.pool, {a.key})->empty()); // asker 1 reads: a miss
  CHECK(find_image_results(m.pool, {a.key})->empty()); // asker 2 reads: a miss
  auto first = enqueue_image_tasks(m.pool, {a});       // asker 1 queues
  REQUIRE(first);
  CHECK(*first == 1);
  auto t = take_image_tasks(m.pool, "ratio", {4}, 10, 10s); // the feeder takes and computes
  REQUIRE(t);
  REQUIRE(t->size() == 1);
  REQUIRE_FALSE(finish_image_tasks(m.pool, {{t->front(), done(a, "1x1")}}));
  auto second = enqueue_image_tasks(m.pool, {a}); // asker 2 queues its (stale) miss
  REQUIRE(second);
  CHECK(*second == 0);
  CHECK(m.db.scalar("SELECT count(*) FROM image_tasks") == "0");
  CHECK(take_image_tasks(m.pool, "ratio", {4}, 10, 10s)->empty());
  CHECK(status_of(m.pool, a.key) == "done");
  // Asked with `compute` it is queued again, as documented.
  auto recompute = a;
  recompute.recompute = true;
  auto third = enqueue_image_tasks(m.pool, {recompute});
  REQUIRE(third);
  CHECK(*third == 1);
  CHECK(status_of(m.pool, a.key) == "done"); // the old result stays until the new one
}

TEST_CASE("a stale miss racing the feeder's finish never leaves a second task") {
  // The same window with real concurrency: the finish and a stale miss's enqueue run at once,
  // many times; whichever commits first, no task is left behind a stored result.
  migrated_db m;
  for (int round = 0; round < 40; ++round) {
    auto a = request("ratio", 5, "http://img/race-" + std::to_string(round) + ".jpg");
    REQUIRE(enqueue_image_tasks(m.pool, {a}));
    auto t = take_image_tasks(m.pool, "ratio", {5}, 10, 10s);
    REQUIRE(t);
    REQUIRE(t->size() == 1);
    std::thread finisher{[&] {
      CHECK_FALSE(finish_image_tasks(m.pool, {{t->front(), done(a, "r")}}));
    }};
    CHECK(enqueue_image_tasks(m.pool, {a}));
    finisher.join();
    CHECK(status_of(m.pool, a.key) == "done");
    CHECK(m.db.scalar("SELECT count(*) FROM image_tasks") == "0");
  }
}

TEST_CASE("tasks are taken oldest first, by function and partition, invisible while taken") {
  migrated_db m;
  for (auto url : {"http://img/1", "http://img/2", "http://img/3"})
    REQUIRE(enqueue_image_tasks(m.pool, {request("preview", 1, url)}));
  REQUIRE(enqueue_image_tasks(m.pool, {request("preview", 2, "http://img/other-partition")}));
  REQUIRE(enqueue_image_tasks(m.pool, {request("ratio", 1, "http://img/other-function")}));
  auto got = take_image_tasks(m.pool, "preview", {1}, 2, 1h);
  REQUIRE(got);
  REQUIRE(got->size() == 2);
  CHECK((*got)[0].args == "http://img/1");
  CHECK((*got)[1].args == "http://img/2");
  auto rest = take_image_tasks(m.pool, "preview", {1}, 10, 1h);
  REQUIRE(rest);
  REQUIRE(rest->size() == 1); // the taken two are invisible
  CHECK(rest->front().args == "http://img/3");
  CHECK(take_image_tasks(m.pool, "preview", {1}, 10, 1h)->empty());
  // A taker that died: after the visibility timeout they are taken again, oldest first.
  tasks_wait_out(m);
  auto again = take_image_tasks(m.pool, "preview", {1, 2}, 10, 300ms);
  REQUIRE(again);
  REQUIRE(again->size() == 4);
  CHECK(again->front().args == "http://img/1");
  CHECK(again->back().args == "http://img/other-partition");
}

TEST_CASE("finishing stores the result and deletes the task at once; retry backs off") {
  migrated_db m;
  auto a = request("main_color", 0, "http://img/a.jpg");
  auto b = request("main_color", 0, "http://img/b.jpg");
  REQUIRE(enqueue_image_tasks(m.pool, {a, b}));
  auto got = take_image_tasks(m.pool, "main_color", {0}, 10, 10s);
  REQUIRE(got);
  REQUIRE(got->size() == 2);
  image_result err;
  err.key = b.key;
  err.status = "error";
  err.error_kind = "not_an_image";
  err.error = "no image format recognised in 12 bytes";
  REQUIRE_FALSE(finish_image_tasks(
    m.pool, {{(*got)[0], done(a, std::string("\x01\x00\xff", 3))}, {(*got)[1], err}}));
  CHECK(m.db.scalar("SELECT count(*) FROM image_tasks") == "0");
  auto rs = find_image_results(m.pool, {a.key, b.key});
  REQUIRE(rs);
  REQUIRE(rs->size() == 2);
  for (auto& r : *rs) {
    if (r.key == a.key) {
      CHECK(r.status == "done");
      CHECK(r.value == std::string("\x01\x00\xff", 3));
    } else {
      CHECK(r.status == "error");
      CHECK(r.error_kind == "not_an_image");
      CHECK(r.value.empty());
    }
  }
  // A task queued again (`compute`) of a key with a live result leaves the result as it is.
  auto recompute_a = a;
  recompute_a.recompute = true;
  REQUIRE(enqueue_image_tasks(m.pool, {recompute_a}));
  CHECK(status_of(m.pool, a.key) == "done");

  // A recoverable failure: attempts counted, due again only after the delay.
  auto t = take_image_tasks(m.pool, "main_color", {0}, 1, 10s);
  REQUIRE(t);
  REQUIRE(t->size() == 1);
  // Visible again at once with the visibility gone, then backed off by the retry.
  REQUIRE_FALSE(retry_image_task(m.pool, t->front(), "HTTP 503", 1h));
  CHECK(take_image_tasks(m.pool, "main_color", {0}, 1, 10s)->empty());
  tasks_wait_out(m);
  auto retried = take_image_tasks(m.pool, "main_color", {0}, 1, 10s);
  REQUIRE(retried);
  REQUIRE(retried->size() == 1);
  CHECK(retried->front().attempts == 1);
  CHECK(retried->front().last_error == "HTTP 503");
}

TEST_CASE("results expire after their TTL and are reaped; an expired key queues again") {
  migrated_db m;
  auto a = request("ratio", 0, "http://img/short.jpg");
  REQUIRE(enqueue_image_tasks(m.pool, {a}));
  auto t = take_image_tasks(m.pool, "ratio", {0}, 1, 10s);
  REQUIRE(t);
  REQUIRE_FALSE(finish_image_tasks(m.pool, {{t->front(), done(a, "r")}}));
  CHECK(status_of(m.pool, a.key) == "done");
  result_expires(m, a.key);
  CHECK(status_of(m.pool, a.key) == "missing"); // expired: not served
  auto again = enqueue_image_tasks(m.pool, {a});
  REQUIRE(again);
  CHECK(*again == 1);
  CHECK(status_of(m.pool, a.key) == "pending"); // the expired row replaced
  // Reaping deletes only expired rows.
  auto b = request("ratio", 0, "http://img/b.jpg");
  REQUIRE(enqueue_image_tasks(m.pool, {b}));
  auto tb = take_image_tasks(m.pool, "ratio", {0}, 10, 10s);
  REQUIRE(tb);
  for (auto& x : *tb)
    if (x.args == b.task.args)
      REQUIRE_FALSE(finish_image_tasks(m.pool, {{x, done(b, "r")}}));
  result_expires(m, b.key);
  auto reaped = reap_image_results(m.pool, 100);
  REQUIRE(reaped);
  CHECK(*reaped == 1);
  CHECK(m.db.scalar("SELECT count(*) FROM image_results") == "1"); // a's pending stays
}

TEST_CASE("two takers at once never take the same task") {
  migrated_db m;
  std::vector<image_request> reqs;
  for (int i = 0; i < 200; ++i)
    reqs.push_back(
      request("preview", static_cast<uint32_t>(i % 4), "http://img/" + std::to_string(i)));
  REQUIRE(enqueue_image_tasks(m.pool, reqs));
  std::mutex mx;
  std::multiset<std::string> taken;
  auto taker = [&] {
    for (;;) {
      auto got = take_image_tasks(m.pool, "preview", {0, 1, 2, 3}, 7, 60s);
      REQUIRE(got);
      if (got->empty())
        return;
      std::lock_guard<std::mutex> g{mx};
      for (auto& t : *got)
        taken.insert(t.args);
    }
  };
  std::thread t1{taker}, t2{taker};
  t1.join();
  t2.join();
  CHECK(taken.size() == 200);
  CHECK(std::set<std::string>(taken.begin(), taken.end()).size() == 200);
}

TEST_CASE("the Kafka queue's half: pending statuses without tasks, undone, and retries queued") {
  migrated_db m;
  auto a = request("ratio", 2, "http://img/a.jpg");
  auto b = request("ratio", 2, "http://img/b.jpg");
  // b has a live result: asking again (compute) leaves it as it is.
  REQUIRE(enqueue_image_tasks(m.pool, {b}));
  auto tb = take_image_tasks(m.pool, "ratio", {2}, 1, 10s);
  REQUIRE(tb);
  REQUIRE(tb->size() == 1);
  REQUIRE_FALSE(finish_image_tasks(m.pool, {{tb->front(), done(b, "old")}}));
  auto before = find_image_results(m.pool, {b.key});
  REQUIRE(before);
  REQUIRE(before->size() == 1);

  auto recompute_b = b;
  recompute_b.recompute = true;
  auto asked = write_image_pending(m.pool, {a, a, recompute_b});
  REQUIRE(asked);
  CHECK(asked->answered.empty());
  CHECK(m.db.scalar("SELECT count(*) FROM image_tasks") == "0"); // the tasks go to Kafka
  auto rs = find_image_results(m.pool, {a.key, b.key});
  REQUIRE(rs);
  REQUIRE(rs->size() == 2);
  for (auto& r : *rs)
    if (r.key == a.key) {
      CHECK(r.status == "pending");
      CHECK(r.updated_at_us == asked->asked_at_us); // the de-duplication compares with this time
    } else {
      CHECK(r.status == "done");
      CHECK(r.value == "old");
      CHECK(r.updated_at_us
            < asked->asked_at_us); // stored before the ask: a task asked now is no duplicate
    }

  // A result stored after the ask is newer than it.
  auto ta = a.task;
  ta.in_table = false;
  REQUIRE_FALSE(finish_image_tasks(m.pool, {{ta, done(a, "new")}}));
  // a asked as a miss again now (its result stored since the asker looked): no task needed.
  auto raced = write_image_pending(m.pool, {a});
  REQUIRE(raced);
  CHECK(raced->answered == std::set<std::string>{a.key});
  auto after = find_image_results(m.pool, {a.key});
  REQUIRE(after);
  REQUIRE(after->size() == 1);
  CHECK(after->front().updated_at_us > asked->asked_at_us);

  // Undo removes only what that ask left pending: not a result, not a later ask's status.
  auto c = request("ratio", 2, "http://img/c.jpg");
  auto asked_c = write_image_pending(m.pool, {c});
  REQUIRE(asked_c);
  REQUIRE_FALSE(undo_image_pending(m.pool, {a.key, c.key}, asked->asked_at_us));
  CHECK(status_of(m.pool, a.key) == "done");
  CHECK(status_of(m.pool, c.key) == "pending");
  REQUIRE_FALSE(undo_image_pending(m.pool, {c.key}, asked_c->asked_at_us));
  CHECK(status_of(m.pool, c.key) == "missing");
  auto again = write_image_pending(m.pool, {c}); // a key undone is asked afresh
  REQUIRE(again);
  CHECK(status_of(m.pool, c.key) == "pending");

  // A recoverable failure of a Kafka task becomes a task of this queue, attempts counted,
  // due after the delay; failing again there counts on.
  auto tc = c.task;
  tc.in_table = false;
  REQUIRE_FALSE(retry_image_task(m.pool, tc, "HTTP 503", 1h));
  CHECK(take_image_tasks(m.pool, "ratio", {2}, 1, 10s)->empty());
  tasks_wait_out(m);
  auto retried = take_image_tasks(m.pool, "ratio", {2}, 1, 10s);
  REQUIRE(retried);
  REQUIRE(retried->size() == 1);
  CHECK(retried->front().in_table);
  CHECK(retried->front().attempts == 1);
  CHECK(retried->front().ttl_ms == c.task.ttl_ms);
  CHECK(retried->front().last_error == "HTTP 503");
  // The same task delivered by Kafka again fails again: one row, attempts on.
  REQUIRE_FALSE(retry_image_task(m.pool, tc, "HTTP 502", 0ms));
  CHECK(m.db.scalar("SELECT count(*) FROM image_tasks") == "1");
  CHECK(m.db.scalar("SELECT attempts FROM image_tasks") == "2");
}
