#include <doctest/doctest.h>

#include "gost/persistence/offers/dead_letters.hpp"
#include "gost/persistence/offers/offer_store.hpp"
#include "gost/persistence/pg_pool.hpp"
#include "gost/v1/offer.pb.h"
#include "pg_fixture.hpp"

using namespace gost::persistence;

namespace {

/// Offers a (shard 1) and b (shard 2); open letters 1 (a, s1, old), 2 (b, s1), 3 (a, s2) and a
/// released one (b, s2).
struct fixture : migrated_db {
  fixture() {
    offer_store store{pool};
    uint32_t shard = 1;
    for (auto id : {"a", "b"}) {
      gost::v1::Offer o;
      o.set_id(id);
      o.set_seller_id("s");
      o.set_version(1);
      REQUIRE_FALSE(store.insert(o, shard++));
    }
    db.scalar("INSERT INTO dead_letters (shard, offer_id, stage_id, reason, attempts, created_at)"
              " VALUES (1, 'a', 's1', 'crashed 3 times: boom', 3, '2026-01-01T00:00:00Z'),"
              " (2, 'b', 's1', 'crashed 3 times: down', 3, '2026-02-01T00:00:00Z'),"
              " (1, 'a', 's2', 'change storm', 1, '2026-03-01T00:00:00Z')");
    db.scalar("INSERT INTO dead_letters (shard, offer_id, stage_id, reason, released_at)"
              " VALUES (2, 'b', 's2', 'old', now())");
  }

  std::vector<int64_t> listed(const dead_letter_filter& f, int64_t after = 0, size_t limit = 10) {
    auto r = list_dead_letters(pool, f, after, limit);
    REQUIRE(r);
    std::vector<int64_t> ids;
    for (auto& d : *r)
      ids.push_back(d.id);
    return ids;
  }

  std::string due(const std::string& offer, const std::string& stage) {
    return db.scalar("SELECT coalesce(due_at_us::text, 'none') FROM stage_states WHERE offer_id = '"
                     + offer + "' AND stage_id = '" + stage + "'");
  }
};

constexpr int64_t feb_1 = 1769904000000000; // 2026-02-01T00:00:00Z in µs

} // namespace

TEST_CASE_FIXTURE(fixture, "dead letters: the open ones, paged by id, filtered by stage and time") {
  auto all = list_dead_letters(pool, {}, 0, 10);
  REQUIRE(all);
  REQUIRE(all->size() == 3);
  auto& first = all->front();
  CHECK(first.id == 1);
  CHECK(first.shard == 1);
  CHECK(first.offer_id == "a");
  CHECK(first.stage_id == "s1");
  CHECK(first.reason == "crashed 3 times: boom");
  CHECK(first.attempts == 3);
  CHECK(first.created_us == 1767225600000000); // 2026-01-01T00:00:00Z
  CHECK(listed({}, 0, 2) == std::vector<int64_t>{1, 2});
  CHECK(listed({}, 2, 2) == std::vector<int64_t>{3});
  dead_letter_filter s1;
  s1.stage_id = "s1";
  CHECK(listed(s1) == std::vector<int64_t>{1, 2});
  dead_letter_filter since;
  since.since_us = feb_1;
  CHECK(listed(since) == std::vector<int64_t>{2, 3});
  dead_letter_filter until;
  until.until_us = feb_1;
  CHECK(listed(until) == std::vector<int64_t>{1});
  dead_letter_filter ids;
  ids.ids = {3, 4};
  CHECK(listed(ids) == std::vector<int64_t>{3}); // 4 is released
}

TEST_CASE_FIXTURE(fixture, "dead letters: a discard releases them and queues nothing") {
  dead_letter_filter one;
  one.ids = {1};
  auto n = discard_dead_letters(pool, one);
  REQUIRE(n);
  CHECK(*n == 1);
  CHECK(due("a", "s1") == "");
  CHECK(listed({}) == std::vector<int64_t>{2, 3});
  CHECK(db.scalar("SELECT released_at IS NOT NULL FROM dead_letters WHERE id = 1") == "t");
  auto none = discard_dead_letters(pool, one);
  REQUIRE(none);
  CHECK(*none == 0);
}
