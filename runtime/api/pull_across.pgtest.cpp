// Pulls and lists across shard groups (ADR 0023) on two real databases: entity outputs pulled
// with a token hold a position per group, every output is seen exactly once whatever the page
// size, the groups take turns; a one-group installation keeps its int64 cursor; ListTasks'
// pages merge in byte order. The token's own rules are checked without a database.
#include <doctest/doctest.h>

#include <set>

#include "api/pull_across.hpp"
#include "gost/persistence/entities/entities.hpp"
#include "gost/persistence/offers/write_behind.hpp"
#include "gost/persistence/tasks/tasks.hpp"
#include "gost/testing/migrated_db.hpp"
#include "gost/testing/two_groups.hpp"

using namespace gost;
using namespace gost::runtime;
using gost::testing::migrated_db;

namespace {

/// `n` outputs of kind `k`'s lane `out` from entities `<prefix>0..`, committed in `db`.
void emit(migrated_db& db, const std::string& prefix, int n) {
  auto epochs = persistence::acquire_all_leases(db.pool, "t", 1);
  REQUIRE(epochs);
  std::vector<persistence::fenced_write<persistence::entity_write>> ws;
  for (int i = 0; i < n; ++i) {
    persistence::entity_write w;
    w.kind = "k";
    w.entity_id = prefix + std::to_string(i);
    w.outputs.emplace_back("out", "payload-" + w.entity_id);
    ws.push_back({0, (*epochs)[0], std::move(w)});
  }
  REQUIRE(persistence::commit_entity_writes(db.pool, ws, "t"));
}

/// One database for every shard.
class one_group final : public persistence::shard_placement {
public:
  explicit one_group(persistence::pg_pool* p) : p_(p) {}
  uint32_t shard_count() const override { return 8; }
  uint32_t group_of(uint32_t) const override { return 0; }
  persistence::pg_pool* database(uint32_t g) const override { return g == 0 ? p_ : nullptr; }
  std::vector<uint32_t> groups() const override { return {0}; }

private:
  persistence::pg_pool* p_;
};

} // namespace

TEST_CASE("a pull token holds a position per group and refuses what it did not give") {
  pull_position p;
  CHECK(parse_pull_token("", p).empty());
  CHECK(p.after.empty());
  CHECK(parse_pull_token("0:12,3:7", p).empty());
  CHECK(p.after == std::map<uint32_t, int64_t>{{0, 12}, {3, 7}});
  CHECK(p.token() == "0:12,3:7");
  for (std::string bad : {"12", "0:", ":5", "0:1,", "a:1", "0:1;1:2", "0:1,0:2", "0:-4", "0:1x"}) {
    auto problem = parse_pull_token(bad, p);
    CHECK_MESSAGE(problem.find("after_token `" + bad + "`") == 0, bad);
    CHECK_MESSAGE(problem.find("next_token") != std::string::npos, problem);
  }
  one_group one{nullptr};
  CHECK(pull_start(one, 5, "", p).empty());
  CHECK(p.after == std::map<uint32_t, int64_t>{{0, 5}});
  CHECK(pull_start(one, 5, "0:5", p).find("not both") != std::string::npos);
  CHECK(pull_start(one, -1, "", p).find("negative") != std::string::npos);
}

TEST_CASE("outputs pulled across two groups' databases: each seen once, the groups in turn, "
          "an int64 cursor refused with two groups and kept with one") {
  migrated_db a, b;
  emit(a, "a", 7);
  emit(b, "b", 3);
  gost::testing::two_groups both{a.pool, b.pool, 8, 4};

  pull_position pos;
  auto first = pull_outputs(both, "k", "out", pos, 4);
  REQUIRE(first);
  REQUIRE(first->size() == 4);
  // In turn: a, b, a, b.
  CHECK((*first)[0].entity_id == "a0");
  CHECK((*first)[1].entity_id == "b0");
  CHECK((*first)[2].entity_id == "a1");
  CHECK((*first)[3].entity_id == "b1");
  CHECK(pos.after.size() == 2);

  // The rest, through the token as a client passes it, in pages of 3.
  std::multiset<std::string> seen;
  for (auto& o : *first)
    seen.insert(o.entity_id);
  for (int page = 0; page < 10; ++page) {
    pull_position next;
    REQUIRE(pull_start(both, 0, pos.token(), next).empty());
    auto rows = pull_outputs(both, "k", "out", next, 3);
    REQUIRE(rows);
    pos = next;
    if (rows->empty())
      break;
    for (auto& o : *rows) {
      seen.insert(o.entity_id);
      CHECK(o.payload == "payload-" + o.entity_id);
    }
  }
  CHECK(seen.size() == 10);
  CHECK(std::set<std::string>(seen.begin(), seen.end()).size() == 10); // none twice
  // Later outputs are found after the same token.
  emit(b, "late", 1);
  auto later = pull_outputs(both, "k", "out", pos, 10);
  REQUIRE(later);
  REQUIRE(later->size() == 1);
  CHECK(later->front().entity_id == "late0");

  pull_position p;
  auto problem = pull_start(both, 3, "", p);
  CHECK(problem.find("2 shard groups") != std::string::npos);
  CHECK(problem.find("after_token") != std::string::npos);

  // One group: the int64 cursor as before.
  one_group one{&a.pool};
  REQUIRE(pull_start(one, 0, "", p).empty());
  auto rows = pull_outputs(one, "k", "out", p, 5);
  REQUIRE(rows);
  REQUIRE(rows->size() == 5);
  REQUIRE(pull_start(one, rows->back().seq, "", p).empty());
  auto rest = pull_outputs(one, "k", "out", p, 5);
  REQUIRE(rest);
  CHECK(rest->size() == 2);
  CHECK(rest->front().entity_id == "a5");
}

TEST_CASE("tagged entities listed across two groups merge in byte order, page by page") {
  migrated_db a, b;
  auto tag = [](migrated_db& db, std::vector<std::string> ids) {
    auto epochs = persistence::acquire_all_leases(db.pool, "t", 1);
    REQUIRE(epochs);
    std::vector<persistence::fenced_write<persistence::entity_write>> ws;
    for (auto& id : ids) {
      persistence::entity_write w;
      w.kind = "task.t";
      w.entity_id = id;
      w.lane = "g";
      w.expected_version = 0;
      w.new_state = "s";
      w.tag = id.back() == 'x' ? "done" : "open";
      ws.push_back({0, (*epochs)[0], std::move(w)});
    }
    REQUIRE(persistence::commit_entity_writes(db.pool, ws, "t"));
  };
  // Byte order puts 'B' and 'Z' before 'a', '_' between them.
  tag(a, {"g:a1", "g:Z2", "g:_3x", "g:b4"});
  tag(b, {"g:B1", "g:a2", "g:c3x"});
  gost::testing::two_groups both{a.pool, b.pool, 8, 4};
  auto page = [&](const std::string& state, const std::string& after, size_t limit) {
    auto r = persistence::merged_page<persistence::tagged_entity>(
      both, limit,
      [&](persistence::pg_pool& db) {
        return persistence::list_tagged_entities(db, "task.t", "g", state, after, limit);
      },
      [](const auto& x, const auto& y) { return x.id < y.id; });
    REQUIRE(r);
    std::vector<std::string> ids;
    for (auto& t : *r)
      ids.push_back(t.id);
    return ids;
  };
  std::vector<std::string> all;
  std::string after;
  for (;;) {
    auto ids = page("", after, 3);
    if (ids.empty())
      break;
    all.insert(all.end(), ids.begin(), ids.end());
    after = ids.back();
  }
  CHECK(all == std::vector<std::string>{"g:B1", "g:Z2", "g:_3x", "g:a1", "g:a2", "g:b4", "g:c3x"});
  CHECK(page("done", "", 10) == std::vector<std::string>{"g:_3x", "g:c3x"});
}
