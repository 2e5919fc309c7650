// The HTTP action end to end below the actor: an action created through the scheduler, moved
// and fired by the worker's steps on the real PostgreSQL against a local HTTP server that the
// test programs (the test clock moves to each retry time):
// - failing twice (503) then answering 200: three requests with one Idempotency-Key, counters
//   exact (1 success, 2 failures in total, none in a row);
// - an endpoint that is down past max attempts: the status says so (gave up, failures in a
//   row, the error), and the next period is still scheduled;
// - a loopback target refused at the connection when private targets are not allowed.
#include <doctest/doctest.h>

#include <vector>

#include "gost/persistence/cluster/leases.hpp"
#include "gost/persistence/pg_pool.hpp"
#include "gost/persistence/schema.hpp"
#include "gost/scheduled/http_call.hpp"
#include "gost/scheduled/scheduler.hpp"
#include "gost/scheduled/worker_steps.hpp"
#include "gost/testing/http_server.hpp"
#include "gost/testing/pg.hpp"

using namespace gost;
using namespace gost::scheduled;
using namespace std::chrono_literals;

namespace {

constexpr int64_t t0 = 1'704'067'200'000;

persistence::pg_pool::options pool_options(const testing::temp_db& db) {
  persistence::pg_pool::options o;
  o.dsn = db.dsn();
  o.size = 2;
  return o;
}

struct one_shard {
  testing::temp_db db;
  persistence::pg_pool pool{pool_options(db)};
  int64_t now = t0;
  rules_options opts;
  std::unique_ptr<scheduler> api;
  std::unique_ptr<worker_steps> worker;

  one_shard() {
    REQUIRE(persistence::migrate(pool));
    REQUIRE_FALSE(persistence::ensure_lease_rows(pool, 1));
    auto r = persistence::acquire_free_lease(pool, "n1", 5s);
    REQUIRE(r);
    REQUIRE(r->lease);
    opts.allow_private_targets = true; // the test server is on loopback
    api = std::make_unique<scheduler>(pool, 1, opts, [this] { return now; });
    worker = std::make_unique<worker_steps>(
      pool, persistence::scheduled_lease{0, r->lease->epoch, "n1"}, opts, [this] { return now; });
  }

  iteration_stats iterate() {
    auto it = worker->iterate(
      [this](const attempt& a) {
        return call_http(a.spec.http(), a.idempotency_key, std::chrono::milliseconds{a.deadline_ms},
                         opts.allow_private_targets);
      },
      100, 100);
    REQUIRE(it);
    return *it;
  }

  v1::ScheduledActionStatus status(const std::string& id) {
    auto a = persistence::get_scheduled_action(pool, id);
    REQUIRE(a);
    REQUIRE(*a);
    return (*a)->status();
  }
};

v1::ScheduledActionSpec hourly_http(const std::string& url, int32_t attempts) {
  v1::ScheduledActionSpec s;
  s.set_start_at_ms(t0);
  s.set_interval_ms(3'600'000);
  s.mutable_retry()->set_max_attempts(attempts);
  s.mutable_retry()->set_backoff_ms(1000);
  s.mutable_retry()->set_attempt_deadline_ms(5000);
  s.mutable_http()->set_url(url);
  s.mutable_http()->set_body("{}");
  return s;
}

} // namespace

TEST_CASE("an endpoint failing twice then succeeding: three calls, one key, counters exact") {
  one_shard w;
  testing::http_server server{{503, 503, 200}};
  REQUIRE(w.api->create("hook-1", hourly_http(server.url(), 5)));

  auto first = w.iterate();
  CHECK(first.moved == 1);
  CHECK(first.failed == 1);
  auto st = w.status("hook-1");
  CHECK(st.failures_in_row() == 1);
  CHECK(st.last_error() == "HTTP 503");

  w.now += 999; // not yet: the retry is 1 s after the attempt
  auto idle = w.iterate();
  CHECK(idle.failed + idle.fired == 0);
  w.now += 1;
  CHECK(w.iterate().failed == 1);
  w.now += 2000; // back-off doubled
  CHECK(w.iterate().fired == 1);

  st = w.status("hook-1");
  CHECK(st.successes() == 1);
  CHECK(st.total_failures() == 2);
  CHECK(st.failures_in_row() == 0);
  CHECK(st.gave_up() == 0);
  CHECK_FALSE(st.in_flight());
  CHECK(st.scheduled_at_ms() == t0 + 3'600'000);
  auto keys = server.keys();
  REQUIRE(keys.size() == 3);
  for (auto& k : keys)
    CHECK(k == "hook-1/" + std::to_string(t0));
}

TEST_CASE("an endpoint down past max attempts: the status says so, the next period is kept") {
  one_shard w;
  int port;
  {
    testing::http_server gone{{200}};
    port = std::stoi(gone.url().substr(17, gone.url().find('/', 17) - 17));
  } // closed: nobody listens on its port now
  auto url = "http://127.0.0.1:" + std::to_string(port) + "/hook";
  REQUIRE(w.api->create("down-1", hourly_http(url, 3)));
  CHECK(w.iterate().failed == 1);
  w.now += 1000;
  CHECK(w.iterate().failed == 1);
  w.now += 2000;
  CHECK(w.iterate().failed == 1);
  auto st = w.status("down-1");
  CHECK(st.gave_up() == 1);
  CHECK(st.failures_in_row() == 3);
  CHECK(st.total_failures() == 3);
  CHECK(st.successes() == 0);
  CHECK(st.last_error().find("onnect") != std::string::npos);
  CHECK_FALSE(st.finished());
  CHECK(st.scheduled_at_ms() == t0 + 3'600'000);
  CHECK(w.db.scalar("SELECT scheduled_at_ms FROM scheduled_processing")
        == std::to_string(t0 + 3'600'000));
}

TEST_CASE("a loopback target is refused at the connection unless private targets are allowed") {
  testing::http_server server{{200}};
  v1::HttpAction h;
  h.set_url(server.url());
  auto refused = call_http(h, "k/1", 2000ms, false);
  CHECK(refused.find("private") != std::string::npos);
  CHECK(server.keys().empty());
  CHECK(call_http(h, "k/1", 2000ms, true).empty());
  CHECK(server.keys().size() == 1);
}
