#include <doctest/doctest.h>

#include "gost/core/stats.hpp"

using namespace gost;
using std::chrono::microseconds;

TEST_CASE("the latency histogram's percentiles are within a bucket (10%) of the truth") {
  latency_histogram h;
  CHECK(h.percentile_ms(0.5) == 0);
  // 1..1000 ms, one each: p50 is 500 ms, p99 is 990 ms.
  for (int ms = 1; ms <= 1000; ++ms)
    h.record(microseconds{ms * 1000});
  CHECK(h.count() == 1000);
  CHECK(h.percentile_ms(0.5) >= 500);
  CHECK(h.percentile_ms(0.5) <= 500 * 1.1);
  CHECK(h.percentile_ms(0.99) >= 990);
  CHECK(h.percentile_ms(0.99) <= 990 * 1.1);
  CHECK(h.sum_us() == 500'500'000);
}

TEST_CASE("the latency histogram takes the extremes") {
  latency_histogram h;
  h.record(microseconds{0});
  h.record(microseconds{-5});
  h.record(microseconds{int64_t{1} << 50}); // beyond the last bucket
  CHECK(h.count() == 3);
  CHECK(h.bucket(0) == 2);
  CHECK(h.bucket(latency_histogram::buckets - 1) == 1);
  CHECK(h.percentile_ms(1.0) == latency_histogram::upper_us(latency_histogram::buckets - 1) / 1000);
}

TEST_CASE("node stats find their stages by id") {
  node_stats s;
  s.add_stage("a");
  s.add_stage("b");
  REQUIRE(s.stage("b") != nullptr);
  s.stage("b")->runs += 2;
  CHECK(s.stage("b")->runs.load() == 2);
  CHECK(s.stage("nope") == nullptr);
}

TEST_CASE("the shard registry lists the shards whose supervisors still hold their figures") {
  kit::shard_registry reg;
  auto a = reg.open(3);
  auto b = reg.open(1);
  a->runs += 5;
  auto live = reg.live();
  REQUIRE(live.size() == 2);
  CHECK(live[0].first == 1); // in shard order
  CHECK(live[1].first == 3);
  CHECK(live[1].second->runs.load() == 5);
  live.clear();
  b.reset(); // shard 1 stopped
  live = reg.live();
  REQUIRE(live.size() == 1);
  CHECK(live[0].first == 3);
  auto again = reg.open(3); // a new supervisor of shard 3 (lease taken again)
  CHECK(reg.live().front().second->runs.load() == 0);
}
