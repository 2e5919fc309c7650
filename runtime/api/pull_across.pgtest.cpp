// Pulls and lists across shard groups (ADR 0023) on two real databases: entity outputs pulled
// with a token hold a position per group, every output is seen exactly once whatever the page
// size, the groups take turns; the int64 cursor works while one database holds a lane's
// outputs and is refused once two do; ListTasks' pages merge in byte order. The token's own rules
// are checked without a database.
#include <doctest/doctest.h>

#include <set>

#include "api/pull_across.hpp"
#include "gost/persistence/entities/entities.hpp"
#include "gost/persistence/errors.hpp"
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
  for (std::string bad : {"12", "0:", ":5", "0:1,", "a:1", "0:1;1:2", "0:1,0:2", "0:-4", "0:1x",
                          "4294967296:5", "0:99999999999999999999"}) {
    auto problem = parse_pull_token(bad, p);
    CHECK_MESSAGE(problem.find("after_token `" + bad + "`") == 0, bad);
    CHECK_MESSAGE(problem.find("next_token") != std::string::npos, problem);
  }
  pull_start_point s;
  CHECK(pull_start(5, "", s).empty());
  CHECK(s.by_cursor);
  CHECK(s.after == 5);
  CHECK(pull_start(0, "0:5", s).empty());
  CHECK_FALSE(s.by_cursor);
  CHECK(s.pos.after == std::map<uint32_t, int64_t>{{0, 5}});
  CHECK(pull_start(5, "0:5", s).find("not both") != std::string::npos);
  CHECK(pull_start(-2, "", s).find("negative") != std::string::npos);
  CHECK(pull_start(-1, "", s).find("next_token as after_token") != std::string::npos);
}

TEST_CASE("outputs pulled across two groups' databases: each seen once, the groups in turn; the "
          "int64 cursor works while one database holds the lane's outputs, and is refused, "
          "never repeating a page, once two do") {
  migrated_db a, b;
  gost::testing::two_groups both{a.pool, b.pool, 8, 4};
  auto start = [&](int64_t after, const std::string& token) {
    pull_start_point s;
    REQUIRE(pull_start(after, token, s).empty());
    return s;
  };
  // Outputs in `a` only (a group declared, holding none yet): the cursor works as with one.
  emit(a, "a", 7);
  auto first = pull_outputs(both, "k", "out", start(0, ""), 5);
  REQUIRE(first);
  CHECK(first->rows.size() == 5);
  CHECK(first->cursor == first->rows.back().seq);
  auto rest = pull_outputs(both, "k", "out", start(first->cursor, ""), 5);
  REQUIRE(rest);
  REQUIRE(rest->rows.size() == 2);
  CHECK(rest->rows.front().entity_id == "a5");
  CHECK(rest->pos.token() == "0:" + std::to_string(rest->cursor));

  // Outputs in both: pages by token, in turn (a, b, a, b ...), each output once.
  emit(b, "b", 3);
  auto mixed = pull_outputs(both, "k", "out", start(0, ""), 4);
  REQUIRE(mixed);
  REQUIRE(mixed->rows.size() == 4);
  CHECK(mixed->rows[0].entity_id == "a0");
  CHECK(mixed->rows[1].entity_id == "b0");
  CHECK(mixed->rows[2].entity_id == "a1");
  CHECK(mixed->rows[3].entity_id == "b1");
  CHECK(mixed->cursor == -1); // passed back as `after`, refused with advice
  std::multiset<std::string> seen;
  for (auto& o : mixed->rows)
    seen.insert(o.entity_id);
  auto token = mixed->pos.token();
  for (int page = 0; page < 10; ++page) {
    auto next = pull_outputs(both, "k", "out", start(0, token), 3);
    REQUIRE(next);
    token = next->pos.token();
    if (next->rows.empty())
      break;
    for (auto& o : next->rows) {
      seen.insert(o.entity_id);
      CHECK(o.payload == "payload-" + o.entity_id);
    }
  }
  CHECK(seen.size() == 10);
  CHECK(std::set<std::string>(seen.begin(), seen.end()).size() == 10); // none twice
  // Later outputs are found after the same token.
  emit(b, "late", 1);
  auto later = pull_outputs(both, "k", "out", start(0, token), 10);
  REQUIRE(later);
  REQUIRE(later->rows.size() == 1);
  CHECK(later->rows.front().entity_id == "late0");
  // The old cursor of `a` alone is refused now, saying what to pass.
  auto refused = pull_outputs(both, "k", "out", start(first->cursor, ""), 5);
  REQUIRE_FALSE(refused);
  auto why = gost::persistence::error_message(refused.error());
  CHECK(why.find("2 shard groups' databases") != std::string::npos);
  CHECK(why.find("after_token") != std::string::npos);

  // One group: the int64 cursor as before.
  one_group one{&a.pool};
  auto rows = pull_outputs(one, "k", "out", start(0, ""), 5);
  REQUIRE(rows);
  REQUIRE(rows->rows.size() == 5);
  auto tail = pull_outputs(one, "k", "out", start(rows->cursor, ""), 5);
  REQUIRE(tail);
  CHECK(tail->rows.size() == 2);
  CHECK(tail->rows.front().entity_id == "a5");
  auto none = pull_outputs(one, "k", "out", start(tail->cursor, ""), 5);
  REQUIRE(none);
  CHECK(none->rows.empty());
  CHECK(none->cursor == tail->cursor);
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
