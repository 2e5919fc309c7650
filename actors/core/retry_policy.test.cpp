#include <doctest/doctest.h>

#include "gost/core/kit/retry_policy.hpp"

using namespace gost;
using kit::retry_policy;
using namespace std::chrono_literals;

namespace {

caf::error broken() {
  return make_error(errc::internal, "the stage threw");
}
caf::error outage() {
  return make_error(errc::unavailable, "the pricing service is down");
}

} // namespace

TEST_CASE("a failing entity is retried with growing back-off, then dead-lettered") {
  retry_policy p{3};
  auto d1 = p.failed("stage", "o1", broken(), 1000ms, 0);
  CHECK(d1.what == retry_policy::decision::kind::retry);
  CHECK(d1.counted);
  CHECK(d1.attempts == 1);
  CHECK(d1.retry_at_us == 1'000'000);
  auto d2 = p.failed("stage", "o1", broken(), 1000ms, 10);
  CHECK(d2.retry_at_us == 10 + 2'000'000); // backoff x attempts
  auto d3 = p.failed("stage", "o1", broken(), 1000ms, 20);
  CHECK(d3.what == retry_policy::decision::kind::dead_letter);
  CHECK(d3.attempts == 3);
  // Dead-lettered: a new run starts counting afresh.
  CHECK(p.attempts("stage", "o1") == 0);
}

TEST_CASE("attempts are per lane and entity; a success forgets them") {
  retry_policy p{2};
  p.failed("a", "o1", broken(), 10ms, 0);
  CHECK(p.attempts("a", "o1") == 1);
  CHECK(p.attempts("b", "o1") == 0);
  CHECK(p.attempts("a", "o2") == 0);
  p.succeeded("a", "o1");
  CHECK(p.attempts("a", "o1") == 0);
  CHECK(p.failed("a", "o1", broken(), 10ms, 0).what == retry_policy::decision::kind::retry);
}

TEST_CASE("an outage counts no attempt, backs off per lane streak and never dead-letters") {
  retry_policy p{1};
  int64_t last = 0;
  for (int i = 0; i < 10; ++i) {
    auto d = p.failed("pricing", "o" + std::to_string(i), outage(), 100ms, 0);
    CHECK(d.what == retry_policy::decision::kind::retry);
    CHECK_FALSE(d.counted);
    CHECK(d.retry_at_us >= last); // 1, 2, 4, ... 32 times the back-off, then stays
    last = d.retry_at_us;
  }
  CHECK(last == 100'000 * retry_policy::max_streak_factor);
  // Another lane has its own streak.
  CHECK(p.failed("other", "o1", outage(), 100ms, 0).retry_at_us == 100'000);
  // A success ends the streak.
  p.succeeded("pricing", "o1");
  CHECK(p.failed("pricing", "o1", outage(), 100ms, 0).retry_at_us == 100'000);
  // Overload (a full pool) is an outage too; a database outage as well.
  CHECK_FALSE(p.failed("x", "o", make_error(errc::overloaded, ""), 1ms, 0).counted);
  CHECK_FALSE(
    p.failed("x", "o", persistence::make_db_error(persistence::db_errc::unavailable, ""), 1ms, 0)
      .counted);
}
