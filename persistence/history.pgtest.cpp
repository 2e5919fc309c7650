// The offers' history (offer_history): written with the write-behind commit, in its
// transaction, only for what committed; read newest first by pages; reaped after retention.
#include <doctest/doctest.h>

#include "gost/persistence/offers/history.hpp"
#include "gost/persistence/offers/offer_store.hpp"
#include "gost/persistence/offers/write_behind.hpp"
#include "gost/v1/events.pb.h"
#include "gost/v1/offer.pb.h"
#include "pg_fixture.hpp"

using namespace gost::persistence;

namespace {

struct fixture : migrated_db {
  std::vector<int64_t> epochs;

  fixture() {
    auto e = acquire_all_leases(pool, "test-node", 4);
    REQUIRE(e);
    epochs = *e;
  }

  static std::string event(const std::string& id, int64_t version, const std::string& by) {
    gost::v1::OfferSaved e;
    e.mutable_offer()->set_id(id);
    e.mutable_offer()->set_version(version);
    e.set_changed_by(by);
    return e.SerializeAsString();
  }

  static std::string body(const std::string& id, int64_t version) {
    gost::v1::Offer o;
    o.set_id(id);
    o.set_seller_id("s");
    o.set_version(version);
    return o.SerializeAsString();
  }

  static write_set create(const std::string& id) {
    write_set ws;
    ws.offer_id = id;
    ws.op = offer_op::insert;
    ws.key = {"s", "", id};
    ws.new_body = body(id, 1);
    ws.outbox = event(id, 1, "api");
    return ws;
  }

  std::vector<write_outcome> commit(uint32_t shard, const std::vector<write_set>& sets,
                                    bool history, int64_t epoch = -1) {
    std::vector<fenced_write<write_set>> batch;
    for (auto& ws : sets)
      batch.push_back({shard, epoch < 0 ? epochs[shard] : epoch, ws});
    auto r = commit_write_sets(pool, batch, "test-node", {history});
    REQUIRE_MESSAGE(r, error_message(r.error()));
    return *r;
  }

  /// "version:changed_by" of the offer's history, newest first.
  std::string history(const std::string& id, int64_t before = 0, size_t limit = 100) {
    auto rows = read_history(pool, id, before, limit);
    REQUIRE(rows);
    std::string out;
    for (auto& r : *rows) {
      gost::v1::OfferSaved e;
      REQUIRE(e.ParseFromString(r.event));
      CHECK(r.at_us > 0);
      out += (out.empty() ? "" : ",") + std::to_string(r.version) + ":" + e.changed_by();
    }
    return out;
  }
};

using outcomes = std::vector<write_outcome>;

} // namespace

TEST_CASE_FIXTURE(fixture, "each committed change is kept with its commit, and nothing else") {
  REQUIRE(commit(1, {create("a")}, true) == outcomes{write_outcome::committed});
  write_set update;
  update.offer_id = "a";
  update.expected_version = 1;
  update.new_body = body("a", 2);
  update.outbox = event("a", 2, "api");
  write_set state_only; // a stage's run that changed its state, not the offer
  state_only.offer_id = "a";
  state_only.expected_version = 2;
  state_only.states = {{"st", "state"}};
  state_only.outbox = event("a", 2, "st");
  write_set stale = update; // computed on version 1: a conflict, never in the history
  stale.outbox = event("a", 2, "stale");
  REQUIRE(commit(1, {update, state_only, stale}, true)
          == outcomes{write_outcome::committed, write_outcome::committed, write_outcome::conflict});
  // A set of a shard held at another epoch is fenced: nothing of it is kept.
  write_set fenced = create("b");
  REQUIRE(commit(1, {fenced}, true, epochs[1] + 7) == outcomes{write_outcome::fenced});
  CHECK(history("a") == "2:st,2:api,1:api");
  CHECK(history("b").empty());
  CHECK(db.scalar("SELECT count(*) FROM outbox_batches") == "2"); // the outbox as before
  // Pages: newest first, then before the last id shown.
  auto first = read_history(pool, "a", 0, 2);
  REQUIRE(first);
  REQUIRE(first->size() == 2);
  CHECK(history("a", first->back().id) == "1:api");
  // A delete is kept too, at the version of the deletion.
  write_set remove;
  remove.offer_id = "a";
  remove.op = offer_op::remove;
  remove.expected_version = 2;
  remove.outbox = event("a", 3, "api");
  REQUIRE(commit(1, {remove}, true) == outcomes{write_outcome::committed});
  CHECK(history("a") == "3:api,2:st,2:api,1:api");
}

TEST_CASE_FIXTURE(fixture, "with the history off nothing is kept") {
  REQUIRE(commit(1, {create("a")}, false) == outcomes{write_outcome::committed});
  CHECK(history("a").empty());
  CHECK(db.scalar("SELECT count(*) FROM offer_history") == "0");
  CHECK(db.scalar("SELECT count(*) FROM outbox_batches") == "1");
}

TEST_CASE_FIXTURE(fixture, "changes older than the retention are reaped, of the given shards") {
  REQUIRE(commit(1, {create("a")}, true) == outcomes{write_outcome::committed});
  REQUIRE(commit(2, {create("b")}, true) == outcomes{write_outcome::committed});
  write_set update;
  update.offer_id = "a";
  update.expected_version = 1;
  update.new_body = body("a", 2);
  update.outbox = event("a", 2, "api");
  REQUIRE(commit(1, {update}, true) == outcomes{write_outcome::committed});
  // The creations happened two days ago.
  db.scalar("UPDATE offer_history SET at = now() - interval '2 days' WHERE version = 1"
            " RETURNING 1");
  auto n = reap_history(pool, {1}, 86'400); // keep one day, on shard 1 only
  REQUIRE(n);
  CHECK(*n == 1);
  CHECK(history("a") == "2:api");
  CHECK(history("b") == "1:api"); // shard 2 is another node's to reap
  CHECK(*reap_history(pool, {2}, 86'400) == 1);
  // Retention 0 (the history turned off): whatever is kept goes.
  n = reap_history(pool, {1}, 0);
  REQUIRE(n);
  CHECK(*n == 1);
  CHECK(db.scalar("SELECT count(*) FROM offer_history") == "0");
}
