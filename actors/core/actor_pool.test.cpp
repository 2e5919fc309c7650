#include <doctest/doctest.h>

#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>

#include "gost/core/actor_pool.hpp"
#include "gost/core/errc.hpp"

using namespace gost;
using namespace std::chrono_literals;

namespace {

struct system_fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  system_fixture() {
    register_core_types(cfg);
    // One scheduler thread: a job blocking it would stop the pool itself from working.
    cfg.set("scheduler.max-threads", size_t{1});
    sys = std::make_unique<caf::actor_system>(cfg);
  }
};

/// Counts jobs running at once; each waits until `target` run together (or a timeout).
struct gate {
  std::mutex m;
  std::condition_variable cv;
  int running = 0;
  int max_seen = 0;
  int target;
  explicit gate(int t) : target(t) {}
  void pass() {
    std::unique_lock<std::mutex> lock{m};
    ++running;
    max_seen = std::max(max_seen, running);
    cv.notify_all();
    cv.wait_for(lock, 5s, [&] { return max_seen >= target; });
    --running;
  }
};

/// Sends `n` jobs and collects the replies (value or error) in order of arrival.
std::vector<caf::expected<pool_result>> run_all(caf::actor_system& sys, const pool_actor& pool,
                                                std::vector<pool_job> jobs) {
  caf::scoped_actor self{sys};
  for (auto& j : jobs)
    self->send(pool, run_atom_v, std::move(j));
  std::vector<caf::expected<pool_result>> out;
  for (size_t i = 0; i < jobs.size(); ++i)
    self->receive([&](pool_result& r) { out.emplace_back(std::move(r)); },
                  [&](caf::error& e) { out.emplace_back(std::move(e)); },
                  caf::after(10s) >> [&] { FAIL("no reply from the pool"); });
  return out;
}

pool_stats stats_of(caf::actor_system& sys, const pool_actor& pool) {
  caf::scoped_actor self{sys};
  pool_stats out;
  self->request(pool, 5s, get_atom_v)
    .receive([&](pool_stats& s) { out = s; }, [&](caf::error&) { FAIL("no stats"); });
  return out;
}

} // namespace

TEST_CASE_FIXTURE(system_fixture,
                  "jobs run on the pool's own threads, as many at once as workers") {
  auto pool = spawn_pool(*sys, {"test", 4, 100});
  auto g = std::make_shared<gate>(4);
  std::vector<pool_job> jobs;
  for (int i = 0; i < 8; ++i)
    jobs.push_back({[g, i] {
      g->pass();
      return std::any{i};
    }});
  auto replies = run_all(*sys, pool, std::move(jobs));
  int sum = 0;
  for (auto& r : replies) {
    REQUIRE(r);
    sum += std::any_cast<int>(r->value);
  }
  CHECK(sum == 0 + 1 + 2 + 3 + 4 + 5 + 6 + 7);
  // Four blocked jobs ran together although CAF has a single scheduler thread.
  CHECK(g->max_seen == 4);
  auto st = stats_of(*sys, pool);
  CHECK(st.submitted == 8);
  CHECK(st.completed == 8);
  CHECK(st.running == 0);
  CHECK(st.queued == 0);
  caf::anon_send_exit(pool, caf::exit_reason::user_shutdown);
}

TEST_CASE_FIXTURE(system_fixture, "max parallelism below the worker count holds") {
  pool_options o{"narrow", 4, 100};
  o.max_parallelism = 2;
  auto pool = spawn_pool(*sys, o);
  // Each job waits until two ran together: with a third at once, max_seen would show it.
  auto g = std::make_shared<gate>(2);
  std::vector<pool_job> jobs;
  for (int i = 0; i < 6; ++i)
    jobs.push_back({[g] {
      g->pass();
      return std::any{};
    }});
  for (auto& r : run_all(*sys, pool, std::move(jobs)))
    CHECK(r);
  CHECK(g->max_seen == 2);
  caf::anon_send_exit(pool, caf::exit_reason::user_shutdown);
}

TEST_CASE_FIXTURE(system_fixture, "a full queue rejects at once; accepted jobs still complete") {
  auto pool = spawn_pool(*sys, {"small", 1, 2});
  auto release = std::make_shared<std::promise<void>>();
  auto released = release->get_future().share();
  std::vector<pool_job> jobs;
  jobs.push_back({[released] {
    released.wait(); // occupies the only worker
    return std::any{std::string{"first"}};
  }});
  for (int i = 0; i < 3; ++i)
    jobs.push_back({[i] { return std::any{i}; }});
  caf::scoped_actor self{*sys};
  for (auto& j : jobs)
    self->send(pool, run_atom_v, std::move(j));
  // The worker holds job 0, jobs 1 and 2 wait, job 3 finds the queue full.
  bool rejected = false;
  self->receive([&](pool_result&) { FAIL("a job finished while the worker was held"); },
                [&](caf::error& e) {
                  rejected = true;
                  CHECK(e == errc::overloaded);
                  CHECK(persistence::error_message(e).find("pool small is full")
                        != std::string::npos);
                },
                caf::after(5s) >> [&] { FAIL("no rejection"); });
  CHECK(rejected);
  release->set_value();
  int done = 0;
  for (int i = 0; i < 3; ++i)
    self->receive([&](pool_result&) { ++done; }, [&](caf::error&) { FAIL("accepted job failed"); },
                  caf::after(5s) >> [&] { FAIL("accepted job lost"); });
  CHECK(done == 3);
  auto st = stats_of(*sys, pool);
  CHECK(st.rejected == 1);
  CHECK(st.completed == 3);
  caf::anon_send_exit(pool, caf::exit_reason::user_shutdown);
}

TEST_CASE_FIXTURE(system_fixture,
                  "a throwing job answers an error with its message; the worker lives on") {
  auto pool = spawn_pool(*sys, {"thrower", 1, 10});
  std::vector<pool_job> jobs;
  jobs.push_back({[]() -> std::any { throw std::runtime_error("boom"); }});
  jobs.push_back({[] { return std::any{42}; }});
  auto replies = run_all(*sys, pool, std::move(jobs));
  REQUIRE(replies.size() == 2);
  REQUIRE_FALSE(replies[0]);
  CHECK(replies[0].error() == errc::internal);
  CHECK(persistence::error_message(replies[0].error()).find("boom") != std::string::npos);
  REQUIRE(replies[1]);
  CHECK(std::any_cast<int>(replies[1]->value) == 42);
  auto st = stats_of(*sys, pool);
  CHECK(st.failed == 1);
  CHECK(st.completed == 1);
  caf::anon_send_exit(pool, caf::exit_reason::user_shutdown);
}

TEST_CASE_FIXTURE(system_fixture, "the rate limit spaces job starts") {
  pool_options o{"slow", 4, 100};
  o.rate_limit = 20; // per second; a burst of at most 2
  auto pool = spawn_pool(*sys, o);
  std::vector<pool_job> jobs;
  for (int i = 0; i < 10; ++i)
    jobs.push_back({[] { return std::any{}; }});
  auto t0 = std::chrono::steady_clock::now();
  for (auto& r : run_all(*sys, pool, std::move(jobs)))
    CHECK(r);
  // 10 starts at 20/s with one token at the start: at least 9 / 20 s.
  CHECK(std::chrono::steady_clock::now() - t0 >= 440ms);
  caf::anon_send_exit(pool, caf::exit_reason::user_shutdown);
}
