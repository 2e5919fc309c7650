// The parked side of the outbox (migration 0022): a row moved aside keeps its id and payload,
// a retry puts it back ahead of its shard's later rows, a drop deletes it.
#include <doctest/doctest.h>

#include "gost/persistence/outbox/outbox.hpp"
#include "gost/persistence/pg_pool.hpp"
#include "pg_fixture.hpp"

using namespace gost::persistence;

namespace {

/// Outbox rows 1, 2, 3 of shard 0 (payloads "p1", "p2", "p3").
struct fixture : migrated_db {
  fixture() {
    db.scalar("INSERT INTO outbox_batches (id, shard, events, payload) VALUES"
              " (1, 0, 1, 'p1'), (2, 0, 1, 'p2'), (3, 0, 2, 'p3')");
  }

  std::vector<int64_t> outbox_ids() {
    auto rows = read_outbox(pool, {0}, 10);
    REQUIRE(rows);
    std::vector<int64_t> ids;
    for (auto& r : *rows)
      ids.push_back(r.id);
    return ids;
  }

  parked_outbox_row refused(int64_t id) {
    parked_outbox_row p;
    p.id = id;
    p.topic = "gost.offer-saved";
    p.key = "offer-" + std::to_string(id);
    p.bytes = 40'000;
    p.reason = "message_too_large";
    p.error = "Broker: Message size too large";
    return p;
  }
};

} // namespace

TEST_CASE_FIXTURE(fixture, "a parked row leaves the outbox with what was refused and why") {
  auto moved = park_outbox(pool, refused(1));
  REQUIRE(moved);
  CHECK(*moved);
  CHECK(outbox_ids() == std::vector<int64_t>{2, 3});
  auto listed = list_parked_outbox(pool, 0, 10);
  REQUIRE(listed);
  REQUIRE(listed->size() == 1);
  auto& p = listed->front();
  CHECK(p.id == 1);
  CHECK(p.shard == 0);
  CHECK(p.events == 1);
  CHECK(p.topic == "gost.offer-saved");
  CHECK(p.key == "offer-1");
  CHECK(p.bytes == 40'000);
  CHECK(p.reason == "message_too_large");
  CHECK(p.error == "Broker: Message size too large");
  CHECK(p.parked_us > 0);
  // A row another relay deleted meanwhile is not parked.
  auto gone = park_outbox(pool, refused(42));
  REQUIRE(gone);
  CHECK_FALSE(*gone);
  CHECK(db.scalar("SELECT count(*) FROM outbox_parked") == "1");
}

TEST_CASE_FIXTURE(fixture,
                  "a retried row is back under its id, first of its shard; a drop deletes") {
  REQUIRE(park_outbox(pool, refused(1)));
  REQUIRE(park_outbox(pool, refused(3)));
  auto page = list_parked_outbox(pool, 1, 10); // after id 1
  REQUIRE(page);
  REQUIRE(page->size() == 1);
  CHECK(page->front().id == 3);

  auto back = retry_parked_outbox(pool, {1, 99});
  REQUIRE(back);
  CHECK(*back == 1);
  CHECK(outbox_ids() == std::vector<int64_t>{1, 2});
  auto rows = read_outbox(pool, {0}, 1);
  REQUIRE(rows);
  CHECK(rows->front().payload == "p1");

  auto dropped = drop_parked_outbox(pool, {3});
  REQUIRE(dropped);
  CHECK(*dropped == 1);
  CHECK(db.scalar("SELECT count(*) FROM outbox_parked") == "0");
  CHECK(outbox_ids() == std::vector<int64_t>{1, 2});
}
