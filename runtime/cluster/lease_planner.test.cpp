#include <doctest/doctest.h>

#include "cluster/lease_planner.hpp"

using gost::runtime::lease_planner;

namespace {

std::vector<lease_planner::lease> owned(std::initializer_list<std::pair<const char*, int>> counts) {
  std::vector<lease_planner::lease> out;
  uint32_t shard = 0;
  for (auto& [node, n] : counts)
    for (int i = 0; i < n; ++i)
      out.push_back({shard++, node, false});
  return out;
}

std::vector<lease_planner::held> held_shards(uint32_t from, uint32_t n) {
  std::vector<lease_planner::held> out;
  for (uint32_t s = from; s < from + n; ++s)
    out.push_back({s, false});
  return out;
}

} // namespace

TEST_CASE("a lone node takes every lease") {
  lease_planner p{"a", 8, 4};
  p.observe({}, {}, {});
  int taken = 0;
  while (p.wants_more()) {
    p.acquired();
    ++taken;
  }
  CHECK(taken == 8);
  CHECK_FALSE(p.next_handoff());
}

TEST_CASE("a joining node takes its share of free leases and no more") {
  lease_planner p{"b", 10, 4};
  auto leases = owned({{"a", 6}});
  for (uint32_t s = 6; s < 10; ++s)
    leases.push_back({s, "", true});
  p.observe({"a", "b"}, leases, {});
  CHECK(p.share_high() == 5);
  int taken = 0;
  while (p.wants_more() && taken < 4) { // only four are free
    p.acquired();
    ++taken;
  }
  CHECK(taken == 4);
}

TEST_CASE("an overloaded node hands shards to the neediest, a few at a time") {
  lease_planner p{"a", 12, 2};
  p.observe({"a", "b", "c"}, owned({{"a", 12}}), held_shards(0, 12));
  auto m1 = p.next_handoff();
  auto m2 = p.next_handoff();
  REQUIRE(m1);
  REQUIRE(m2);
  CHECK(m1->first == 0); // lowest shard first
  CHECK(m2->first == 1);
  CHECK(m1->second != m2->second); // spread over b and c
  CHECK_FALSE(p.next_handoff());   // max_moves in progress
}

TEST_CASE("an even cluster moves nothing; moves in progress count against the limit") {
  lease_planner even{"a", 9, 4};
  even.observe({"a", "b", "c"}, owned({{"a", 3}, {"b", 3}, {"c", 3}}), held_shards(0, 3));
  CHECK_FALSE(even.wants_more());
  CHECK_FALSE(even.next_handoff());

  lease_planner busy{"a", 8, 1};
  auto mine = held_shards(0, 8);
  mine[0].draining = true; // one hand-off already under way
  busy.observe({"a", "b"}, owned({{"a", 8}}), mine);
  CHECK_FALSE(busy.next_handoff());
}

TEST_CASE("leases of dead nodes are free and do not count as anyone's load") {
  lease_planner p{"a", 6, 4};
  std::vector<lease_planner::lease> leases{{0, "dead", true}, {1, "dead", true}, {2, "b", false}};
  p.observe({"a", "b"}, leases, {});
  CHECK(p.share_high() == 3);
  CHECK(p.wants_more());
}
