#include <doctest/doctest.h>

#include <limits>

#include <map>

#include "gost/core/kit/lane_scheduler.hpp"

using namespace gost;
using kit::lane_options;
using kit::lane_scheduler;
using persistence::priority;
using persistence::queue_entry;

namespace {

/// Options per lane from a table; lanes not in it get the defaults (as unknown lanes do).
lane_scheduler::options_fn lanes(std::map<std::string, lane_options> table = {}) {
  return [table](const std::string& lane) {
    auto i = table.find(lane);
    return i == table.end() ? lane_options{} : i->second;
  };
}

std::vector<queue_entry> entries(const std::string& lane, int n, int64_t due, priority p,
                                 const std::string& prefix = "o") {
  std::vector<queue_entry> out;
  for (int i = 0; i < n; ++i)
    out.push_back({lane, prefix + std::to_string(i), due, p});
  return out;
}

} // namespace

TEST_CASE("an entity is once in a lane's in-memory queue, and only due work is taken") {
  lane_scheduler s{lanes(), 4};
  CHECK(s.add(entries("a", 3, 100, priority::normal)) == 3);
  CHECK(s.add(entries("a", 3, 50, priority::normal)) == 0); // already known
  CHECK(s.take(99).empty());
  CHECK(s.next_due() == 100);
  auto w = s.take(100);
  CHECK(w.size() == 3);
  CHECK(s.in_flight("a") == 3);
  // While in flight, the same entry is not taken again even if re-added.
  CHECK(s.add(entries("a", 1, 100, priority::normal)) == 0);
  s.done("a", "o0");
  CHECK(s.in_flight("a") == 2);
  CHECK(s.add(entries("a", 1, 100, priority::normal)) == 1);
}

TEST_CASE("max parallelism holds per lane and a slow lane does not hold back another") {
  lane_options slow;
  slow.max_parallelism = 2;
  lane_scheduler s{lanes({{"slow", slow}}), 4};
  s.add(entries("slow", 10, 0, priority::normal));
  s.add(entries("fast", 10, 0, priority::normal));
  auto w = s.take(1);
  size_t slow_n = 0, fast_n = 0;
  for (auto& x : w)
    (x.lane == "slow" ? slow_n : fast_n)++;
  CHECK(slow_n == 2);
  CHECK(fast_n == 10);
  CHECK(s.take(2).empty()); // slow is full, fast is empty
  s.done("slow", w.front().entity_id);
  auto more = s.take(3);
  REQUIRE(more.size() == 1);
  CHECK(more.front().lane == "slow");
}

TEST_CASE("the rate limit holds") {
  lane_options limited;
  limited.rate_limit = 100; // per second; bucket of 10
  limited.max_parallelism = 1000;
  lane_scheduler s{lanes({{"r", limited}}), 4};
  s.add(entries("r", 1000, 0, priority::normal));
  int64_t t = 1'000'000;
  size_t taken = s.take(t).size();
  CHECK(taken == 10); // the initial bucket
  // Over one simulated second, about 100 more.
  for (int i = 1; i <= 100; ++i)
    taken += s.take(t + i * 10'000).size();
  CHECK(taken >= 105);
  CHECK(taken <= 111);
}

TEST_CASE("background work gets its share but never starves normal work") {
  lane_options one_at_a_time;
  one_at_a_time.max_parallelism = 1;
  lane_scheduler s{lanes({{"a", one_at_a_time}}), 4};
  s.add(entries("a", 100, 0, priority::background, "bg"));
  s.add(entries("a", 100, 0, priority::normal, "n"));
  int normal = 0, background = 0;
  for (int i = 0; i < 40; ++i) {
    auto w = s.take(1);
    REQUIRE(w.size() == 1);
    (w.front().entity_id.rfind("bg", 0) == 0 ? background : normal)++;
    s.done("a", w.front().entity_id);
  }
  CHECK(normal == 30);
  CHECK(background == 10);
}

TEST_CASE("a failed run comes back after its back-off") {
  lane_scheduler s{lanes(), 4};
  s.add(entries("a", 1, 0, priority::normal));
  REQUIRE(s.take(1).size() == 1);
  s.retry("a", "o0", 500);
  CHECK(s.take(499).empty());
  CHECK(s.take(500).size() == 1);
}

TEST_CASE("entities with an entry coming due are handed out once for prefetching") {
  lane_scheduler s{lanes(), 4};
  s.add(entries("a", 2, 1'000, priority::normal, "soon"));
  s.add(entries("a", 1, 5'000, priority::normal, "later"));
  s.add(entries("a", 1, 10, priority::normal, "now"));
  CHECK(s.next_warm_due() == 10);
  // At 500 with a 600 µs window: the two due at 1000 are warmed; the one due at 10 is already
  // due (its run loads it), the one at 5000 is not near yet.
  auto w = s.take_warm(500, 1'100);
  CHECK(w == std::vector<std::string>{"soon0", "soon1"});
  CHECK(s.next_warm_due() == 5'000);
  CHECK(s.take_warm(600, 1'200).empty()); // each once
  CHECK(s.take_warm(4'500, 5'000) == std::vector<std::string>{"later0"});
  CHECK(s.next_warm_due() == std::numeric_limits<int64_t>::max());
}

TEST_CASE("a lane seen for the first time at run time asks for its options once") {
  int asked = 0;
  lane_scheduler s{[&](const std::string& lane) {
                     ++asked;
                     lane_options o;
                     o.max_parallelism = lane == "group-7" ? 1 : 64;
                     return o;
                   },
                   4};
  s.add(entries("group-7", 3, 0, priority::normal));
  CHECK(s.take(1).size() == 1); // the new lane's own limit
  CHECK(s.options("group-7").max_parallelism == 1);
  s.add(entries("group-7", 1, 0, priority::normal, "x"));
  s.take(2);
  CHECK(asked == 1);
}
