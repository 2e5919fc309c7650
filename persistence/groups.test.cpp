#include <doctest/doctest.h>

#include "gost/persistence/cluster/groups.hpp"
#include "gost/persistence/cluster/moves.hpp"

using gost::persistence::group_map;
using gost::persistence::shard_group;
using gost::persistence::shard_range;

namespace {

std::vector<shard_group> two_groups() {
  return {{0, "main", ""}, {1, "east", "host=db-east dbname=gost"}};
}

// The error of an invalid map (empty when the map was valid).
std::string error_of(std::vector<shard_group> g, std::vector<shard_range> r, uint32_t count = 16) {
  auto m = group_map::make(std::move(g), std::move(r), count, 1);
  auto* e = std::get_if<std::string>(&m);
  return e ? *e : std::string{};
}

} // namespace

TEST_CASE("group map: one group holds every shard when no other is declared") {
  auto m = group_map::single(64);
  CHECK(m.single_group());
  CHECK(m.group_of(0).id == 0);
  CHECK(m.group_of(63).id == 0);
  CHECK(m.group_of(63).dsn.empty()); // the catalog's own DSN
  CHECK(m.shards_of(0).size() == 64);
  CHECK(m.first_outside(0) == nullptr);
}

TEST_CASE("group map: shards find their group by range, ranges in any order") {
  auto made = group_map::make(
    two_groups(), {{8, 15, 1, std::nullopt}, {0, 3, 0, std::nullopt}, {4, 7, 1, std::nullopt}}, 16,
    7);
  REQUIRE(std::holds_alternative<group_map>(made));
  auto& m = std::get<group_map>(made);
  CHECK_FALSE(m.single_group());
  CHECK(m.version() == 7);
  CHECK(m.group_of(0).id == 0);
  CHECK(m.group_of(3).id == 0);
  CHECK(m.group_of(4).name == "east");
  CHECK(m.group_of(15).id == 1);
  CHECK(m.range_of(9).first == 8);
  CHECK(m.shards_of(0) == std::vector<uint32_t>{0, 1, 2, 3});
  CHECK(m.shards_of(1).size() == 12);
  CHECK(m.find(2) == nullptr);
  REQUIRE(m.find(1) != nullptr);
  CHECK(m.find(1)->dsn == "host=db-east dbname=gost");
  REQUIRE(m.first_outside(0) != nullptr);
  CHECK(m.first_outside(0)->first == 4);
  REQUIRE(m.first_outside(1) != nullptr);
  CHECK(m.first_outside(1)->first == 0);
}

TEST_CASE("group map: ranges cover every shard exactly once; the error names the shards") {
  CHECK(error_of(two_groups(), {{0, 7, 0, {}}, {9, 15, 1, {}}})
        == "no range holds shard 8: every shard needs a group");
  CHECK(error_of(two_groups(), {{0, 7, 0, {}}, {6, 15, 1, {}}})
        == "two ranges hold shards 6-7: each shard belongs to one range");
  CHECK(error_of(two_groups(), {{0, 7, 0, {}}, {8, 13, 1, {}}})
        == "no range holds shards 14-15: every shard needs a group");
  CHECK(error_of(two_groups(), {{0, 7, 0, {}}, {8, 16, 1, {}}})
        == "the range shards 8-16 goes past the installation's 16 shards (0-15)");
  CHECK(error_of(two_groups(), {{0, 7, 0, {}}, {15, 8, 1, {}}})
        == "the range 15-8 ends before it starts: give first <= last");
  CHECK(error_of(two_groups(), {}) == "no range holds shards 0-15: every shard needs a group");
}

TEST_CASE("group map: groups are declared once, named, and every group but 0 has a DSN") {
  std::vector<shard_range> all_in_0{{0, 15, 0, {}}};
  CHECK(error_of({{0, "main", ""}, {0, "again", ""}}, all_in_0)
        == "group 0 is declared twice: give each group one row");
  CHECK(error_of({{0, "main", ""}, {1, "main", "host=x"}}, all_in_0)
        == "two groups are named `main`: names must be unique");
  CHECK(error_of({{0, "", ""}}, all_in_0)
        == "group 0 has no name: name it (logs and gostctl show it)");
  CHECK(error_of({{0, "main", "host=x"}}, all_in_0)
        == "group 0 is the catalog database (pg.dsn): leave its dsn empty");
  CHECK(error_of({{0, "main", ""}, {1, "east", ""}}, all_in_0)
        == "group 1 (`east`) has no dsn: give its database's connection string");
}

TEST_CASE("group map: a range names a declared group, and moves to another one") {
  CHECK(error_of(two_groups(), {{0, 7, 0, {}}, {8, 15, 2, {}}})
        == "the range shards 8-15 names group 2, which is not declared: add the group first");
  CHECK(error_of(two_groups(), {{0, 7, 0, 0u}, {8, 15, 1, {}}})
        == "the range shards 0-7 moves to group 0: a move needs another declared group");
  CHECK(error_of(two_groups(), {{0, 7, 0, 3u}, {8, 15, 1, {}}})
        == "the range shards 0-7 moves to group 3: a move needs another declared group");
  CHECK(error_of(two_groups(), {{0, 7, 0, 1u}, {8, 15, 1, {}}}).empty());
  auto moving = group_map::make(two_groups(), {{0, 15, 0, 1u}}, 16, 2);
  REQUIRE(std::holds_alternative<group_map>(moving));
  REQUIRE(std::get<group_map>(moving).first_outside(0) != nullptr); // moving away: not held alone
}

namespace {

/// main 0-7, east 8-15, west declared and empty.
group_map three_groups(std::optional<uint32_t> east_moving_to = std::nullopt) {
  auto m = group_map::make({{0, "main", ""}, {1, "east", "host=e"}, {2, "west", "host=w"}},
                           {{0, 7, 0, std::nullopt}, {8, 15, 1, east_moving_to}}, 16, 3);
  return std::get<group_map>(std::move(m));
}

std::string refusal(const group_map& m, uint32_t first, uint32_t last, const std::string& to) {
  auto p = gost::persistence::plan_move(m, first, last, to);
  auto* e = std::get_if<std::string>(&p);
  return e ? *e : std::string{};
}

} // namespace

TEST_CASE("move plan: a whole group to another declared group; the same move again resumes") {
  auto m = three_groups();
  auto p = gost::persistence::plan_move(m, 8, 15, "west");
  REQUIRE(std::holds_alternative<gost::persistence::move_plan>(p));
  auto& plan = std::get<gost::persistence::move_plan>(p);
  CHECK(plan.from == 1);
  CHECK(plan.to == 2);
  CHECK(plan.from_name == "east");
  CHECK(plan.to_name == "west");
  CHECK_FALSE(plan.resumed);
  CHECK(plan.whole);
  CHECK(plan.shard_count == 16);
  // Group 0's shards move too (the catalog stays where it is).
  CHECK(refusal(m, 0, 7, "west").empty());

  auto moving = three_groups(2u);
  auto again = gost::persistence::plan_move(moving, 8, 15, "west");
  REQUIRE(std::holds_alternative<gost::persistence::move_plan>(again));
  CHECK(std::get<gost::persistence::move_plan>(again).resumed);
}

TEST_CASE("move plan: refusals say what to give") {
  auto m = three_groups();
  CHECK(refusal(m, 9, 8, "west")
        == "the range 9-8 ends before it starts: give FIRST-LAST with FIRST <= LAST");
  CHECK(refusal(m, 8, 16, "west") == "shards 8-16 go past the installation's 16 shards (0-15)");
  CHECK(refusal(m, 8, 15, "north")
        == "no group is named `north` (declared: main, east, west); declare it first with "
           "`gostctl group add`");
  CHECK(refusal(m, 4, 11, "west")
        == "shards 4-11 span groups `main` and `east`: move one group's shards at a time");
  CHECK(refusal(m, 8, 15, "east") == "shards 8-15 are in group `east` already");
  // Another move under way: finished first.
  auto moving = three_groups(0u);
  CHECK(refusal(moving, 0, 7, "west")
        == "a move is under way: shards 8-15 of `east` to `main`; ask for that move again to "
           "finish it first");
}

TEST_CASE("move plan: a part of a group (a split); while it is under way, only it may be asked "
          "for again") {
  auto m = three_groups();
  auto p = gost::persistence::plan_move(m, 12, 15, "west");
  REQUIRE(std::holds_alternative<gost::persistence::move_plan>(p));
  auto& plan = std::get<gost::persistence::move_plan>(p);
  CHECK_FALSE(plan.whole);
  CHECK_FALSE(plan.resumed);
  CHECK(plan.from_name == "east");
  CHECK(plan.shard_count == 16);

  // The map while it moves: east 8-11, and 12-15 of east marked for west.
  auto cut = std::get<group_map>(
    group_map::make({{0, "main", ""}, {1, "east", "host=e"}, {2, "west", "host=w"}},
                    {{0, 7, 0, std::nullopt}, {8, 11, 1, std::nullopt}, {12, 15, 1, 2u}}, 16, 4));
  auto again = gost::persistence::plan_move(cut, 12, 15, "west");
  REQUIRE(std::holds_alternative<gost::persistence::move_plan>(again));
  CHECK(std::get<gost::persistence::move_plan>(again).resumed);
  CHECK_FALSE(std::get<gost::persistence::move_plan>(again).whole);
  CHECK(refusal(cut, 8, 11, "west")
        == "a move of shards 12-15 of `east` to `west` is under way; ask for that move again to "
           "finish it first");
  CHECK(refusal(cut, 8, 15, "west")
        == "a move of shards 12-15 of `east` to `west` is under way; ask for that move again to "
           "finish it first");
  // After it: east holds 8-11, west 12-15; 8-11 is east's whole now.
  auto after = std::get<group_map>(group_map::make(
    {{0, "main", ""}, {1, "east", "host=e"}, {2, "west", "host=w"}},
    {{0, 7, 0, std::nullopt}, {8, 11, 1, std::nullopt}, {12, 15, 2, std::nullopt}}, 16, 5));
  auto rest = gost::persistence::plan_move(after, 8, 11, "west");
  REQUIRE(std::holds_alternative<gost::persistence::move_plan>(rest));
  CHECK(std::get<gost::persistence::move_plan>(rest).whole);
}
