// The router's shard groups (ADR 0023): a confirmation per group, and ids drawn into an owner's
// home group.
#include <doctest/doctest.h>

#include <set>

#include "cluster/router.hpp"

using namespace gost::runtime;

TEST_CASE("the router keeps a lease confirmation per shard group: one group unconfirmed refuses "
          "its shards only") {
  // Shards 0-3 in group 0, 4-7 in group 1.
  router r{8, {}, {0, 0, 0, 0, 1, 1, 1, 1}};
  CHECK(r.group_count() == 2);
  CHECK(r.group_of(5) == 1);
  auto now = lease_confirmation::clock::now();
  r.confirmation(0).enable("n1", std::chrono::milliseconds{1000}, std::chrono::milliseconds{100},
                           now);
  r.confirmation(1).enable("n1 group=east", std::chrono::milliseconds{1000},
                           std::chrono::milliseconds{100}, now);
  r.confirmation(0).set_alone(true); // confirmed (nobody else could take its leases)
  // Group 1 never confirmed: its shards are refused, group 0's served.
  CHECK(r.confirmed_now(1));
  caf::error refused;
  CHECK_FALSE(r.confirmed_now(6, &refused));
  CHECK(refused);
  CHECK(r.confirmation(1).refusals() == 1);
  CHECK(r.confirmation(0).refusals() == 0);
}

TEST_CASE("a new offer's id is drawn into its seller's home group, the same draws on a retry") {
  router one{8, {}};
  int calls = 0;
  CHECK(id_in_home_group(one, "seller",
                         [&](int k) {
                           ++calls;
                           return "id" + std::to_string(k);
                         })
        == "id0");
  CHECK(calls == 1); // one group: the first draw
  router two{8, {}, {0, 0, 0, 0, 1, 1, 1, 1}};
  std::set<uint32_t> homes;
  for (int s = 0; s < 20; ++s) {
    auto seller = "seller-" + std::to_string(s);
    auto home = two.group_of(two.shard_of(seller));
    homes.insert(home);
    auto draw = [&](int k) { return seller + "/offer-" + std::to_string(k); };
    auto id = id_in_home_group(two, seller, draw);
    CHECK(two.group_of(two.shard_of(id)) == home);
    CHECK(id_in_home_group(two, seller, draw) == id); // deterministic draws: the same id
  }
  CHECK(homes.size() == 2); // both groups were somebody's home
}

TEST_CASE("a range moved to a group declared empty: its shards follow that group's confirmation "
          "from the switch on") {
  // Shards 0-3 in group 0, 4-7 in group 1; group 2 declared, holding none.
  router r{8, {}, {0, 0, 0, 0, 1, 1, 1, 1}, 3};
  CHECK(r.group_count() == 3);
  auto now = lease_confirmation::clock::now();
  for (uint32_t g = 0; g < 3; ++g)
    r.confirmation(g).enable("n1", std::chrono::milliseconds{1000}, std::chrono::milliseconds{100},
                             now);
  r.confirmation(1).set_alone(true); // group 1 confirmed, group 2 not yet
  CHECK(r.confirmed_now(6));
  for (uint32_t s = 4; s < 8; ++s)
    r.set_group_of(s, 2);
  CHECK(r.group_of(6) == 2);
  caf::error refused;
  CHECK_FALSE(r.confirmed_now(6, &refused)); // group 2's leases: not confirmed yet
  CHECK(refused);
  r.confirmation(2).set_alone(true);
  CHECK(r.confirmed_now(6));
  // New ids of a seller at home in the moved range are drawn into group 2 now.
  for (int s = 0; s < 20; ++s) {
    auto seller = "seller-" + std::to_string(s);
    if (r.group_of(r.shard_of(seller)) != 2)
      continue;
    auto id = id_in_home_group(r, seller, [&](int k) { return seller + "/" + std::to_string(k); });
    CHECK(r.group_of(r.shard_of(id)) == 2);
  }
}
