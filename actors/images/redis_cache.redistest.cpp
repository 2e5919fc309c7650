// The Redis layer on a real Redis (scripts/redis.sh; GOST_TEST_REDIS) and on one the test
// starts and kills -9: writes carry the TTL left in PostgreSQL, a fill never overwrites, and
// Redis away answers "ask PostgreSQL" quickly, counted, and is asked again after retry_after.
#include <doctest/doctest.h>

#include <chrono>

#include "gost/core/dependency.hpp"
#include "gost/images/redis_cache.hpp"
#include "gost/images/stats.hpp"
#include "gost/testing/redis.hpp"

using namespace gost;
using namespace gost::images;
using namespace std::chrono_literals;

namespace {

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

persistence::image_result row(std::string key, std::string status, int64_t ttl_ms) {
  persistence::image_result r;
  r.key = std::move(key);
  r.function = "ratio";
  r.args = "http://img.example/a.jpg";
  r.status = std::move(status);
  r.value = status == "done" ? "v" : "";
  r.expires_at_us = now_us() + ttl_ms * 1000;
  return r;
}

std::string unique_prefix() {
  return "gost-test:" + std::to_string(::getpid()) + ":" + std::to_string(now_us()) + ":";
}

} // namespace

TEST_CASE("results are written with the TTL left and read back; a fill never overwrites") {
  image_stats stats;
  redis_options o;
  o.address = testing::redis_address();
  o.prefix = unique_prefix();
  redis_cache cache{o, nullptr, &stats};
  testing::redis_client redis{o.address};
  REQUIRE_MESSAGE(redis.command({"PING"}) == "PONG",
                  "no Redis at " << o.address << ": scripts/redis.sh start (GOST_TEST_REDIS)");

  auto a = row("a", "done", 60'000);
  a.value = "first";
  REQUIRE(cache.put({a}, false));
  auto pttl = std::stoll(redis.command({"PTTL", o.prefix + "a"}));
  CHECK(pttl > 58'000);
  CHECK(pttl <= 60'000);

  auto got = cache.get({"a", "missing"});
  REQUIRE(got);
  REQUIRE(got->size() == 1);
  CHECK((*got)[0].key == "a");
  CHECK((*got)[0].value == "first");
  CHECK((*got)[0].status == "done");
  CHECK(stats.redis_hits == 1);

  auto older = a;
  older.value = "stale";
  REQUIRE(cache.put({older}, true)); // a read's fill: the key has a value, it stays
  CHECK(cache.get({"a"})->at(0).value == "first");
  auto newer = a;
  newer.value = "second";
  REQUIRE(cache.put({newer}, false)); // a result stored: replaces
  CHECK(cache.get({"a"})->at(0).value == "second");

  REQUIRE(cache.put({row("gone", "done", -5)}, false)); // expired: not written
  CHECK(redis.command({"EXISTS", o.prefix + "gone"}) == "0");

  redis.command({"SET", o.prefix + "foreign", "not ours"}); // under the prefix, not a result
  CHECK(cache.get({"foreign"})->empty());
  CHECK(stats.redis_fallbacks == 0);
  redis.command({"DEL", o.prefix + "a", o.prefix + "foreign"});
}

TEST_CASE("Redis killed: calls fall back at once, counted and tracked; back after retry_after") {
  testing::private_redis server;
  image_stats stats;
  dependency_tracker::options to;
  to.name = "redis";
  std::vector<std::string> lines;
  to.write = [&](dependency_tracker::line, const std::string& text) { lines.push_back(text); };
  auto tracker = std::make_shared<dependency_tracker>(to);
  redis_options o;
  o.address = server.address();
  o.prefix = "t:";
  o.retry_after = 300ms;
  // retry_after on the test's clock: it passes when the test moves it, however slow the machine.
  auto clock_now = std::chrono::steady_clock::now();
  o.now = [&clock_now] { return clock_now; };
  redis_cache cache{o, tracker, &stats};
  REQUIRE(cache.put({row("k", "error", 60'000)}, false));
  REQUIRE(cache.get({"k"})->size() == 1);

  server.kill9();
  auto t0 = std::chrono::steady_clock::now();
  CHECK_FALSE(cache.get({"k"})); // the broken connection: fallback
  CHECK_FALSE(cache.get({"k"})); // within retry_after: not even tried
  CHECK_FALSE(cache.put({row("k", "done", 60'000)}, false));
  CHECK(std::chrono::steady_clock::now() - t0 < 250ms);
  CHECK(stats.redis_fallbacks == 3);
  CHECK_FALSE(tracker->up());
  CHECK(lines.size() == 1); // one "lost" line, not one per call

  auto tried = tracker->failed_calls();
  clock_now += 299ms;
  CHECK_FALSE(cache.get({"k"})); // still within retry_after: not tried
  CHECK(stats.redis_fallbacks == 4);
  CHECK(tracker->failed_calls() == tried);
  clock_now += 1ms;
  CHECK_FALSE(cache.get({"k"})); // tried again: still refused (nothing listens)
  CHECK(stats.redis_fallbacks == 5);
  CHECK(tracker->failed_calls() == tried + 1);
  CHECK(lines.size() == 1);

  server.start(); // a new, empty server on the same port
  clock_now += 300ms;
  auto got = cache.get({"k"});
  REQUIRE(got);
  CHECK(got->empty()); // empty after the restart: PostgreSQL answers and fills it
  CHECK(tracker->up());
  CHECK(lines.size() == 2); // ... and one "back" line
}
