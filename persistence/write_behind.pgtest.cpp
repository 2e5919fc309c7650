#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include <pqxx/pqxx>

#include "gost/persistence/offers/offer_store.hpp"
#include "gost/persistence/offers/write_behind.hpp"
#include "gost/persistence/pg_pool.hpp"
#include "gost/persistence/schema.hpp"
#include "gost/testing/pg.hpp"
#include "gost/testing/process.hpp"
#include "gost/v1/events.pb.h"
#include "gost/v1/offer.pb.h"
#include "pg_fixture.hpp"

using namespace gost::persistence;

namespace {

struct fixture : migrated_db {
  int64_t epoch = 0;           ///< of shard 1, where a and b live
  std::vector<int64_t> epochs; ///< of every shard

  fixture() {
    auto e = acquire_all_leases(pool, "test-node", 4);
    REQUIRE(e);
    epochs = *e;
    epoch = (*e)[1];
    offer_store store{pool};
    for (auto id : {"a", "b"}) {
      gost::v1::Offer o;
      o.set_id(id);
      o.set_seller_id("s");
      o.set_version(1);
      REQUIRE_FALSE(store.insert(o, 1));
    }
  }

  std::string body(const std::string& id, int64_t version, const std::string& title) {
    gost::v1::Offer o;
    o.set_id(id);
    o.set_seller_id("s");
    o.set_title(title);
    o.set_version(version);
    return o.SerializeAsString();
  }

  /// An outbox event: the offer `id` saved at `version`.
  static std::string event(const std::string& id, int64_t version) {
    gost::v1::OfferSaved e;
    e.mutable_offer()->set_id(id);
    e.mutable_offer()->set_version(version);
    e.set_changed_by("test");
    return e.SerializeAsString();
  }

  /// Every outbox event in order, as "id:version", batches separated by "|".
  std::string outbox() {
    pqxx::connection c{db.dsn()};
    pqxx::nontransaction tx{c};
    std::string out;
    for (auto row : tx.exec("SELECT events, payload FROM outbox_batches ORDER BY id")) {
      gost::v1::OutboxBatch batch;
      REQUIRE(batch.ParseFromString(pqxx::binarystring{row[1]}.str()));
      CHECK(batch.events_size() == row[0].as<int>());
      out += out.empty() ? "" : "|";
      for (int i = 0; i < batch.events_size(); ++i)
        out += (i == 0 ? "" : ",") + batch.events(i).offer().id() + ":"
               + std::to_string(batch.events(i).offer().version());
    }
    return out;
  }

  /// Commits `sets` of shard 1 at the lease epoch (or `at_epoch`).
  std::vector<write_outcome> commit(const std::vector<write_set>& sets, int64_t at_epoch = -1) {
    std::vector<fenced_write<write_set>> batch;
    for (auto& ws : sets)
      batch.push_back({1, at_epoch < 0 ? epoch : at_epoch, ws});
    auto r = commit_write_sets(pool, batch, "test-node");
    REQUIRE_MESSAGE(r, error_message(r.error()));
    return *r;
  }
};

} // namespace

TEST_CASE_FIXTURE(fixture, "a write-set commits offer, state, queue changes and outbox together") {
  REQUIRE(
    commit({write_set{"a", 1, std::nullopt, {}, {}, {{"s1", "a", 100, priority::normal}}, {}}})
    == std::vector<write_outcome>{write_outcome::committed});
  write_set ws;
  ws.offer_id = "a";
  ws.expected_version = 1;
  ws.new_body = body("a", 2, "changed");
  ws.states = {{"s1", "state-bytes"}};
  ws.dequeue = {"s1"};
  ws.enqueue = {{"s2", "a", 200, priority::normal}, {"s1", "a", 5'000, priority::normal}};
  ws.outbox = event("a", 2);
  REQUIRE(commit({ws}) == std::vector<write_outcome>{write_outcome::committed});
  CHECK(db.scalar("SELECT version FROM offers WHERE offer_id = 'a'") == "2");
  CHECK(db.scalar("SELECT encode(state, 'escape') FROM stage_states WHERE offer_id = 'a'"
                  " AND stage_id = 's1'")
        == "state-bytes");
  // s1's consumed entry (due 100) is gone; its new timer (5000) and s2's entry are there.
  CHECK(db.scalar("SELECT string_agg(stage_id || ':' || due_at_us, ',' ORDER BY stage_id)"
                  " FROM stage_states WHERE due_at_us IS NOT NULL AND offer_id = 'a'")
        == "s1:5000,s2:200");
  CHECK(outbox() == "a:2");
}

TEST_CASE_FIXTURE(fixture, "a stale version rejects only its own write-set") {
  write_set stale{
    "a",          7, body("a", 8, "x"), {{"s1", "lost"}}, {}, {{"s2", "a", 1, priority::normal}},
    event("a", 8)};
  write_set good{"b", 1, body("b", 2, "y"), {{"s1", "kept"}}, {}, {}, event("b", 2)};
  auto r = commit({stale, good});
  CHECK(r == std::vector<write_outcome>{write_outcome::conflict, write_outcome::committed});
  CHECK(db.scalar("SELECT version FROM offers WHERE offer_id = 'a'") == "1");
  CHECK(db.scalar("SELECT count(*) FROM stage_states WHERE offer_id = 'a'") == "0");
  CHECK(
    db.scalar("SELECT count(*) FROM stage_states WHERE due_at_us IS NOT NULL AND offer_id = 'a'")
    == "0");
  CHECK(db.scalar("SELECT version FROM offers WHERE offer_id = 'b'") == "2");
  CHECK(outbox() == "b:2"); // the stale set's event is not there
  // A missing offer is a conflict too.
  CHECK(commit({write_set{"nope", 1, {}, {}, {}, {}, {}}})
        == std::vector<write_outcome>{write_outcome::conflict});
}

TEST_CASE_FIXTURE(fixture, "several events of one offer in one batch apply in order") {
  write_set first{"a", 1, body("a", 2, "one"), {{"s1", "1"}}, {}, {}, event("a", 2)};
  write_set second{"a", 2, body("a", 3, "two"), {{"s1", "2"}}, {}, {}, event("a", 3)};
  write_set stale{"a", 2, body("a", 3, "stale"), {}, {}, {}, {}};
  auto r = commit({first, second, stale});
  CHECK(r
        == std::vector<write_outcome>{write_outcome::committed, write_outcome::committed,
                                      write_outcome::conflict});
  CHECK(db.scalar("SELECT version FROM offers WHERE offer_id = 'a'") == "3");
  CHECK(db.scalar("SELECT encode(state, 'escape') FROM stage_states WHERE offer_id = 'a'") == "2");
  CHECK(outbox() == "a:2,a:3"); // one batch row, events in commit order
  offer_store store{pool};
  auto o = store.load("a");
  REQUIRE(o);
  CHECK((*o)->title() == "two");
}

TEST_CASE_FIXTURE(
  fixture, "an offer is at most once in a stage's queue; earliest due and highest priority win") {
  commit({write_set{"a", 1, {}, {}, {}, {{"s1", "a", 500, priority::background}}, {}}});
  commit({write_set{"a", 1, {}, {}, {}, {{"s1", "a", 900, priority::normal}}, {}},
          write_set{"a", 1, {}, {}, {}, {{"s1", "a", 300, priority::background}}, {}}});
  CHECK(db.scalar("SELECT count(*) || ':' || min(due_at_us) || ':' || min(priority)"
                  " FROM stage_states WHERE due_at_us IS NOT NULL AND offer_id = 'a'")
        == "1:300:0");
  auto q = queued_for(pool, "a");
  REQUIRE(q);
  REQUIRE(q->size() == 1);
  CHECK(q->front().lane == "s1");
  auto due = due_entries(pool, 1, 300, 10);
  REQUIRE(due);
  CHECK(due->size() == 1);
  auto not_yet = due_entries(pool, 1, 299, 10);
  REQUIRE(not_yet);
  // Nothing due by 299; the hint (kit::queue_store) is the first entry past it.
  REQUIRE(not_yet->size() == 1);
  CHECK(not_yet->front().due_at_us == 300);
}

TEST_CASE_FIXTURE(fixture, "a due read answers its page, then the first entry past the window") {
  commit({write_set{"a", 1, {}, {}, {}, {{"s1", "a", 100, priority::normal}}, {}},
          write_set{"b", 1, {}, {}, {}, {{"s1", "b", 200, priority::normal}}, {}},
          write_set{"a", 1, {}, {}, {}, {{"s2", "a", 5000, priority::normal}}, {}},
          write_set{"b", 1, {}, {}, {}, {{"s2", "b", 9000, priority::normal}}, {}}});
  auto due = due_entries(pool, 1, 1000, 10);
  REQUIRE(due);
  REQUIRE(due->size() == 3);
  CHECK((*due)[0].entity_id == "a");
  CHECK((*due)[1].entity_id == "b");
  CHECK((*due)[2].lane == "s2"); // the hint: a's entry due 5000, after the window's 1000
  CHECK((*due)[2].due_at_us == 5000);
  // After a cursor (b): the page is empty, the hint stays.
  auto after = due_entries(pool, 1, 1000, 10, &(*due)[1]);
  REQUIRE(after);
  REQUIRE(after->size() == 1);
  CHECK(after->front().due_at_us == 5000);
  // A page cut by its limit still ends with the hint.
  auto cut = due_entries(pool, 1, 1000, 1);
  REQUIRE(cut);
  REQUIRE(cut->size() == 2);
  CHECK(cut->front().entity_id == "a");
  CHECK(cut->back().due_at_us == 5000);
  // Nothing past the window: no hint.
  auto all = due_entries(pool, 1, 10'000, 10);
  REQUIRE(all);
  CHECK(all->size() == 4);
}

TEST_CASE_FIXTURE(fixture, "a node with a stale lease epoch cannot write") {
  auto stale_epoch = epoch;
  auto again = acquire_all_leases(pool, "other-node", 4);
  REQUIRE(again);
  CHECK((*again)[1] == stale_epoch + 1);
  auto r = commit({write_set{"a", 1, body("a", 2, "fenced"), {{"s1", "x"}}, {}, {}, event("a", 2)}},
                  stale_epoch);
  CHECK(r == std::vector<write_outcome>{write_outcome::fenced});
  CHECK(db.scalar("SELECT version FROM offers WHERE offer_id = 'a'") == "1");
  CHECK(outbox().empty());
}

TEST_CASE_FIXTURE(fixture, "a lease at the batch's epoch but owned by another node, or by none, "
                           "refuses the write: the owner is compared too (ADR 0023 §6)") {
  // An epoch issued twice: a failover lost the bump, and another node got the same number
  // (docs/sharding.md, "High availability of a primary"). Only the owner tells them apart.
  db.scalar("UPDATE shard_leases SET owner = 'other-node' WHERE shard = 1");
  auto r =
    commit({write_set{"a", 1, body("a", 2, "fenced"), {{"s1", "x"}}, {}, {}, event("a", 2)}});
  CHECK(r == std::vector<write_outcome>{write_outcome::fenced});
  // Released (owner NULL) at the same epoch: nobody holds it, nobody writes.
  db.scalar("UPDATE shard_leases SET owner = NULL WHERE shard = 1");
  r = commit({write_set{"a", 1, body("a", 2, "fenced"), {{"s1", "x"}}, {}, {}, event("a", 2)}});
  CHECK(r == std::vector<write_outcome>{write_outcome::fenced});
  CHECK(db.scalar("SELECT version FROM offers WHERE offer_id = 'a'") == "1");
  CHECK(outbox().empty());
  // Held again by this node at that epoch: it writes.
  db.scalar("UPDATE shard_leases SET owner = 'test-node' WHERE shard = 1");
  r = commit({write_set{"a", 1, body("a", 2, "held"), {{"s1", "x"}}, {}, {}, event("a", 2)}});
  CHECK(r == std::vector<write_outcome>{write_outcome::committed});
  CHECK(db.scalar("SELECT version FROM offers WHERE offer_id = 'a'") == "2");
}

TEST_CASE_FIXTURE(fixture,
                  "insert creates the offer with its queue entries; a taken key is a conflict") {
  write_set ins;
  ins.offer_id = "n1";
  ins.op = offer_op::insert;
  ins.new_body = body("n1", 1, "new");
  ins.key = {"s", "shop", "sku-1"};
  ins.enqueue = {{"s1", "n1", 10, priority::normal}};
  ins.outbox = event("n1", 1);
  write_set dup = ins;
  dup.offer_id = "n2"; // same seller key
  write_set exists = ins;
  exists.offer_id = "a"; // id taken
  exists.key.external_id = "other";
  auto r = commit({ins, dup, exists});
  CHECK(r
        == std::vector<write_outcome>{write_outcome::committed, write_outcome::conflict,
                                      write_outcome::conflict});
  CHECK(db.scalar(
          "SELECT version || ':' || shard || ':' || external_id FROM offers WHERE offer_id = 'n1'")
        == "1:1:sku-1");
  CHECK(
    db.scalar(
      "SELECT count(*) FROM stage_states WHERE due_at_us IS NOT NULL AND offer_id IN ('n1', 'n2')")
    == "1");
  CHECK(db.scalar("SELECT count(*) FROM offers WHERE offer_id = 'n2'") == "0");
  // A key claimed for an offer in another group's database (offer_keys, migration 0031) is
  // taken too; the batch's other new offers go in.
  db.scalar("INSERT INTO offer_keys (seller_id, namespace, external_id, offer_id)"
            " VALUES ('s', 'shop', 'far', 'stray-1')");
  write_set claimed = ins;
  claimed.offer_id = "n3";
  claimed.key.external_id = "far";
  write_set free = ins;
  free.offer_id = "n4";
  free.key.external_id = "sku-4";
  CHECK(commit({claimed, free})
        == std::vector<write_outcome>{write_outcome::conflict, write_outcome::committed});
  CHECK(db.scalar("SELECT string_agg(offer_id, ',' ORDER BY offer_id) FROM offers"
                  " WHERE offer_id IN ('n3', 'n4')")
        == "n4");
}

TEST_CASE_FIXTURE(fixture, "a new offer whose seller's home shard moved to another group's "
                           "database (a split's fence), or was never in this one, is "
                           "home_moved; the batch's others commit") {
  // Shard 3 is seller "far"'s home shard; a split fenced it (its lease row names the group it
  // went to). Shard 2, seller "near"'s home, is another node's: that is no refusal. Shard 9,
  // seller "away"'s home, has no lease row here: another group's (an id drawn before a split
  // whose shard moved here since, the insert routed on to this database's owner).
  db.scalar("UPDATE shard_leases SET owner = 'moved:west' WHERE shard = 3");
  db.scalar("UPDATE shard_leases SET owner = 'other-node' WHERE shard = 2");
  commit_options opts;
  std::vector<std::string> asked;
  opts.home_shard = [&](const std::string& seller) -> uint32_t {
    asked.push_back(seller);
    return seller == "far" ? 3 : seller == "away" ? 9 : 2;
  };
  auto insert = [&](const std::string& id, const std::string& seller) {
    write_set ws;
    ws.offer_id = id;
    ws.op = offer_op::insert;
    ws.new_body = body(id, 1, "new");
    ws.key = {seller, "shop", "sku-" + id};
    ws.outbox = event(id, 1);
    return fenced_write<write_set>{1, epoch, ws};
  };
  std::vector<fenced_write<write_set>> batch{
    insert("n1", "near"),
    insert("n2", "far"),
    insert("n3", "away"),
    {1, epoch, write_set{"a", 1, body("a", 2, "changed"), {}, {}, {}, event("a", 2)}}};
  auto r = commit_write_sets(pool, batch, "test-node", opts);
  REQUIRE_MESSAGE(r, error_message(r.error()));
  CHECK(*r
        == std::vector<write_outcome>{write_outcome::committed, write_outcome::home_moved,
                                      write_outcome::home_moved, write_outcome::committed});
  CHECK(asked == std::vector<std::string>{"near", "far", "away"}); // inserts only
  CHECK(db.scalar("SELECT string_agg(offer_id, ',' ORDER BY offer_id) FROM offers") == "a,b,n1");
  CHECK(db.scalar("SELECT count(*) FROM stage_states WHERE offer_id IN ('n2', 'n3')") == "0");
  CHECK(outbox() == "n1:1,a:2");
  // Without the option (one database no split touches) the insert is not checked.
  batch = {insert("n2", "far")};
  r = commit_write_sets(pool, batch, "test-node");
  REQUIRE(r);
  CHECK(*r == std::vector<write_outcome>{write_outcome::committed});
}

/// A change of `id` at `version` that gives it the seller key (seller, ns, external).
write_set rekey(const std::string& id, int64_t version, const std::string& seller,
                const std::string& ns, const std::string& external) {
  write_set ws;
  ws.offer_id = id;
  ws.expected_version = version;
  gost::v1::Offer o;
  o.set_id(id);
  o.set_seller_id(seller);
  o.set_namespace_(ns);
  o.set_external_id(external);
  o.set_version(version + 1);
  ws.new_body = o.SerializeAsString();
  ws.rekey = true;
  ws.key = {seller, ns, external};
  return ws;
}

TEST_CASE_FIXTURE(fixture, "a change that re-keys an offer moves its key columns; a key another "
                           "offer holds is key_taken and applies nothing") {
  offer_store store{pool};
  auto key_of = [&](const std::string& id) {
    return db.scalar("SELECT seller_id || '/' || namespace || '/' || coalesce(external_id, '-')"
                     " FROM offers WHERE offer_id = '"
                     + id + "'");
  };
  REQUIRE(commit({rekey("a", 1, "s2", "shop", "k1")})
          == std::vector<write_outcome>{write_outcome::committed});
  CHECK(key_of("a") == "s2/shop/k1");
  auto found = store.find_id("s2", "shop", "k1");
  REQUIRE(found);
  CHECK(found->value_or("") == "a");
  auto listed = store.list_by_seller("s2", std::nullopt, "", 10);
  REQUIRE(listed);
  CHECK(listed->offers.size() == 1);

  // b may not take a's key: nothing of its set is written, not its body, not its event.
  auto taken = rekey("b", 1, "s2", "shop", "k1");
  taken.states = {{"s1", "lost"}};
  taken.outbox = event("b", 2);
  CHECK(commit({taken}) == std::vector<write_outcome>{write_outcome::key_taken});
  CHECK(key_of("b") == "s//-");
  CHECK(db.scalar("SELECT version FROM offers WHERE offer_id = 'b'") == "1");
  CHECK(db.scalar("SELECT count(*) FROM stage_states WHERE offer_id = 'b'") == "0");
  CHECK(outbox().empty());

  // A key another set of the batch gives up is not free for this one (retried, it is); a
  // removed offer's key is.
  CHECK(commit({rekey("a", 2, "s2", "shop", "k2"), rekey("b", 1, "s2", "shop", "k1")})
        == std::vector<write_outcome>{write_outcome::committed, write_outcome::key_taken});
  CHECK(commit({rekey("b", 1, "s2", "shop", "k1")})
        == std::vector<write_outcome>{write_outcome::committed});
  write_set rm;
  rm.offer_id = "a";
  rm.op = offer_op::remove;
  rm.expected_version = 3;
  CHECK(commit({rm, rekey("b", 2, "s2", "shop", "k2")})
        == std::vector<write_outcome>{write_outcome::committed, write_outcome::committed});
  CHECK(key_of("b") == "s2/shop/k2");
  // A key claimed for an offer in another group's database is not free either.
  db.scalar("INSERT INTO offer_keys (seller_id, namespace, external_id, offer_id)"
            " VALUES ('s2', 'shop', 'far', 'stray-1')");
  CHECK(commit({rekey("b", 3, "s2", "shop", "far")})
        == std::vector<write_outcome>{write_outcome::key_taken});
  // The old key is free again: an insert takes it.
  write_set ins;
  ins.offer_id = "n1";
  ins.op = offer_op::insert;
  ins.new_body = body("n1", 1, "new");
  ins.key = {"s2", "shop", "k1"};
  CHECK(commit({ins}) == std::vector<write_outcome>{write_outcome::committed});
  // No external id: no unique key to hold (several offers of a seller may have none).
  CHECK(commit({rekey("b", 3, "s2", "shop", ""), rekey("n1", 1, "s2", "shop", "")})
        == std::vector<write_outcome>{write_outcome::committed, write_outcome::committed});
  CHECK(key_of("n1") == "s2/shop/-");
}

TEST_CASE_FIXTURE(fixture, "re-keys within one batch: the last key of an offer wins, a key taken "
                           "later in the batch or by its new offers is not free") {
  auto key_of = [&](const std::string& id) {
    return db.scalar("SELECT coalesce(external_id, '-') FROM offers WHERE offer_id = '" + id + "'");
  };
  // a: k1 -> k2 -> k3 in one batch; its earlier keys stay unusable in that batch, not after.
  CHECK(commit({rekey("a", 1, "s", "shop", "k1"), rekey("a", 2, "s", "shop", "k2"),
                rekey("a", 3, "s", "shop", "k3")})
        == std::vector<write_outcome>{write_outcome::committed, write_outcome::committed,
                                      write_outcome::committed});
  CHECK(key_of("a") == "k3");
  CHECK(db.scalar("SELECT version FROM offers WHERE offer_id = 'a'") == "4");
  // And back to where it was, k3 -> k4 -> k3.
  CHECK(commit({rekey("a", 4, "s", "shop", "k4"), rekey("a", 5, "s", "shop", "k3")})
        == std::vector<write_outcome>{write_outcome::committed, write_outcome::committed});
  CHECK(key_of("a") == "k3");
  // A holder removed after the re-key in the batch: the re-key came first, the key was taken.
  write_set rm;
  rm.offer_id = "a";
  rm.op = offer_op::remove;
  rm.expected_version = 6;
  CHECK(commit({rekey("b", 1, "s", "shop", "k3"), rm})
        == std::vector<write_outcome>{write_outcome::key_taken, write_outcome::committed});
  CHECK(key_of("b") == "-");
  // A key a new offer of the same batch takes (inserts go first).
  write_set ins;
  ins.offer_id = "n1";
  ins.op = offer_op::insert;
  ins.new_body = body("n1", 1, "new");
  ins.key = {"s", "shop", "k5"};
  CHECK(commit({rekey("b", 1, "s", "shop", "k5"), ins})
        == std::vector<write_outcome>{write_outcome::key_taken, write_outcome::committed});
  // Giving up a key (no external id) frees it for the next batch.
  CHECK(commit({rekey("n1", 1, "s", "shop", "")})
        == std::vector<write_outcome>{write_outcome::committed});
  CHECK(commit({rekey("b", 1, "s", "shop", "k5")})
        == std::vector<write_outcome>{write_outcome::committed});
  CHECK(key_of("b") == "k5");
  CHECK(key_of("n1") == "-");
}

TEST_CASE_FIXTURE(fixture, "a re-key racing another transaction's insert of that key is key_taken "
                           "and the rest of its batch commits") {
  // Another writer (a node's writer for another shard) inserts key k9 and has not committed.
  pqxx::connection other{db.dsn()};
  pqxx::work insert{other};
  insert.exec("INSERT INTO offers (offer_id, shard, seller_id, namespace, external_id, version,"
              " body) VALUES ('z', 2, 's', 'shop', 'k9', 1, '')");
  std::vector<write_outcome> r;
  std::thread writer{[&] {
    r = commit(
      {rekey("a", 1, "s", "shop", "k9"), write_set{"b", 1, body("b", 2, "y"), {}, {}, {}, {}}});
  }};
  // The batch's key UPDATE waits on the unique index for the other transaction.
  bool waiting = gost::testing::eventually(std::chrono::seconds{60}, [&] {
    return db.scalar("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                     " AND wait_event_type = 'Lock'")
           != "0";
  });
  insert.commit();
  writer.join();
  REQUIRE(waiting);
  CHECK(r == std::vector<write_outcome>{write_outcome::key_taken, write_outcome::committed});
  CHECK(db.scalar("SELECT coalesce(external_id, '-') || ':' || version FROM offers"
                  " WHERE offer_id = 'a'")
        == "-:1");
  CHECK(db.scalar("SELECT version FROM offers WHERE offer_id = 'b'") == "2");
}

TEST_CASE_FIXTURE(fixture, "a key change needs its old and new seller's home shards in this "
                           "database; one of an offer stored outside them is key_elsewhere") {
  // Homes: s on 1, s0 on 0 (another node's: still this database's), s2 on 3 (moved away by a
  // split), s5 on 5 (never this database's: no lease row here).
  db.scalar("UPDATE shard_leases SET owner = 'other-node' WHERE shard = 0");
  db.scalar("UPDATE shard_leases SET owner = 'moved:west' WHERE shard = 3");
  commit_options opts;
  opts.home_shard = [](const std::string& seller) -> uint32_t {
    return seller == "s0" ? 0 : seller == "s2" ? 3 : seller == "s5" ? 5 : 1;
  };
  auto run = [&](write_set ws, const std::string& previous) {
    ws.previous_seller = previous;
    std::vector<fenced_write<write_set>> batch{{1, epoch, ws}};
    auto r = commit_write_sets(pool, batch, "test-node", opts);
    REQUIRE_MESSAGE(r, error_message(r.error()));
    return r->at(0);
  };
  CHECK(run(rekey("a", 1, "s0", "shop", "k1"), "s") == write_outcome::committed);
  CHECK(db.scalar("SELECT seller_id FROM offers WHERE offer_id = 'a'") == "s0");
  // To a seller at home elsewhere, whether moved away or never here: refused, nothing written.
  CHECK(run(rekey("a", 2, "s2", "shop", "k1"), "s0") == write_outcome::key_elsewhere);
  CHECK(run(rekey("a", 2, "s5", "shop", "k1"), "s0") == write_outcome::key_elsewhere);
  // From a seller at home elsewhere (the offer is a stray here), even to a key of this one.
  db.scalar("UPDATE offers SET seller_id = 's2' WHERE offer_id = 'b'");
  CHECK(run(rekey("b", 1, "s2", "shop", "k2"), "s2") == write_outcome::key_elsewhere);
  CHECK(run(rekey("b", 1, "s", "shop", "k2"), "s2") == write_outcome::key_elsewhere);
  CHECK(db.scalar("SELECT version || ':' || seller_id || ':' || coalesce(external_id, '-') FROM"
                  " offers WHERE offer_id = 'a'")
        == "2:s0:k1");
  CHECK(db.scalar("SELECT version || ':' || seller_id FROM offers WHERE offer_id = 'b'") == "1:s2");
  // A change that keeps the key is not checked.
  CHECK(run(write_set{"b", 1, body("b", 2, "title"), {}, {}, {}, event("b", 2)}, "")
        == write_outcome::committed);
}

TEST_CASE_FIXTURE(fixture, "remove deletes the offer, its states and queue entries") {
  commit({write_set{"a", 1, {}, {{"s1", "st"}}, {}, {{"s1", "a", 10, priority::normal}}, {}}});
  write_set rm;
  rm.offer_id = "a";
  rm.op = offer_op::remove;
  rm.expected_version = 1;
  rm.outbox = event("a", 2);
  CHECK(commit({rm}) == std::vector<write_outcome>{write_outcome::committed});
  CHECK(db.scalar("SELECT count(*) FROM offers WHERE offer_id = 'a'") == "0");
  CHECK(db.scalar("SELECT count(*) FROM stage_states WHERE offer_id = 'a'") == "0");
  CHECK(
    db.scalar("SELECT count(*) FROM stage_states WHERE due_at_us IS NOT NULL AND offer_id = 'a'")
    == "0");
  CHECK(outbox() == "a:2");
}

TEST_CASE_FIXTURE(fixture, "bookkeeping sets dead-letter an entry without a version check") {
  commit({write_set{"a", 1, {}, {}, {}, {{"s1", "a", 10, priority::normal}}, {}}});
  write_set dl;
  dl.offer_id = "a";
  dl.op = offer_op::none;
  dl.expected_version = 42; // ignored
  dl.dequeue = {"s1"};
  dl.dead_letters = {{"s1", "crashed 3 times: boom", 3}};
  CHECK(commit({dl}) == std::vector<write_outcome>{write_outcome::committed});
  CHECK(
    db.scalar("SELECT count(*) FROM stage_states WHERE due_at_us IS NOT NULL AND offer_id = 'a'")
    == "0");
  CHECK(db.scalar("SELECT stage_id || ':' || attempts || ':' || reason FROM dead_letters")
        == "s1:3:crashed 3 times: boom");
  CHECK(db.scalar("SELECT count(*) FROM stage_states WHERE offer_id = 'a'") == "0");
}

TEST_CASE_FIXTURE(fixture,
                  "a queue entry shares its row with the stage's state; each keeps the other") {
  commit({write_set{"a",
                    1,
                    {},
                    {{"s1", "st"}},
                    {},
                    {{"s1", "a", 10, priority::normal}, {"s2", "a", 20, priority::normal}},
                    {}}});
  auto rows = [&] {
    return db.scalar("SELECT string_agg(stage_id || '/' || coalesce(encode(state, 'escape'), '-')"
                     " || '/' || coalesce(due_at_us::text, '-'), ' ' ORDER BY stage_id)"
                     " FROM stage_states WHERE offer_id = 'a'");
  };
  CHECK(rows() == "s1/st/10 s2/-/20");
  // Queued again (a later due time loses to the earlier one); the state stays.
  commit({write_set{"a", 1, {}, {}, {}, {{"s1", "a", 30, priority::normal}}, {}}});
  CHECK(rows() == "s1/st/10 s2/-/20");
  // Both consumed without new states: s1 keeps its state, s2's row (only an entry) goes.
  commit({write_set{"a", 1, {}, {}, {"s1", "s2"}, {}, {}}});
  CHECK(rows() == "s1/st/-");
  // A new state without touching the queue, then a timer for it: both land in the one row.
  commit({write_set{"a", 1, {}, {{"s1", "st2"}}, {}, {}, {}}});
  commit({write_set{"a", 1, {}, {}, {}, {{"s1", "a", 40, priority::background}}, {}}});
  CHECK(rows() == "s1/st2/40");
  CHECK(db.scalar("SELECT priority FROM stage_states WHERE offer_id = 'a'") == "1");
  auto loaded = load_offers(pool, {"a"});
  REQUIRE(loaded);
  REQUIRE(loaded->size() == 1);
  CHECK(loaded->front().states.size() == 1);
  REQUIRE(loaded->front().queued.size() == 1);
  CHECK(loaded->front().queued.front().due_at_us == 40);
  CHECK(loaded->front().queued.front().prio == priority::background);
}

TEST_CASE_FIXTURE(fixture,
                  "bookkeeping for a deleted offer drops its entry and writes nothing back") {
  commit({write_set{"a", 1, {}, {}, {}, {{"s1", "a", 10, priority::normal}}, {}}});
  CHECK(commit({write_set{"b", 1, {}, {}, {}, {}, std::nullopt, offer_op::remove}})
        == std::vector<write_outcome>{write_outcome::committed});
  // A rescan enqueue and a run's state for the deleted offer "b": only the dequeue applies.
  write_set late;
  late.offer_id = "b";
  late.op = offer_op::none;
  late.states = {{"s1", "zombie"}};
  late.dequeue = {"s1"};
  late.enqueue = {{"s2", "b", 5, priority::background}};
  CHECK(commit({late}) == std::vector<write_outcome>{write_outcome::committed});
  CHECK(db.scalar("SELECT count(*) FROM stage_states WHERE offer_id = 'b'") == "0");
  CHECK(db.scalar("SELECT count(*) FROM stage_states WHERE offer_id = 'a'") == "1");
}

TEST_CASE_FIXTURE(fixture, "one batch of several shards fences each set by its own shard's epoch") {
  // Shard 2 moved away (its epoch went up behind this node's back); 1 and 3 are still held.
  REQUIRE(db.scalar("UPDATE shard_leases SET epoch = epoch + 1 WHERE shard = 2 RETURNING epoch")
          == std::to_string(epochs[2] + 1));
  write_set up{"a", 1, body("a", 2, "moved on"), {}, {}, {}, event("a", 2)};
  write_set lost;
  lost.offer_id = "m";
  lost.op = offer_op::insert;
  lost.key = {"s", "", "ext-m"};
  lost.new_body = body("m", 1, "never");
  lost.outbox = event("m", 1);
  auto fresh = lost;
  fresh.offer_id = "n";
  fresh.key.external_id = "ext-n";
  fresh.new_body = body("n", 1, "new");
  fresh.outbox = event("n", 1);
  std::vector<fenced_write<write_set>> batch{
    {1, epochs[1], up}, {2, epochs[2], lost}, {3, epochs[3], fresh}};
  auto r = commit_write_sets(pool, batch, "test-node");
  REQUIRE_MESSAGE(r, error_message(r.error()));
  CHECK(*r
        == std::vector<write_outcome>{write_outcome::committed, write_outcome::fenced,
                                      write_outcome::committed});
  CHECK(db.scalar("SELECT version FROM offers WHERE offer_id = 'a'") == "2");
  CHECK(db.scalar("SELECT count(*) FROM offers WHERE offer_id = 'm'") == "0");
  CHECK(db.scalar("SELECT shard FROM offers WHERE offer_id = 'n'") == "3");
  // One outbox row per shard that committed, each with its own shard's events.
  CHECK(
    db.scalar("SELECT string_agg(shard || ':' || events, ',' ORDER BY shard) FROM outbox_batches")
    == "1:1,3:1");
  CHECK(outbox() == "a:2|n:1");
}

TEST_CASE_FIXTURE(
  fixture, "a write with a request id commits once; a retry is a duplicate and applies nothing") {
  write_set up{"a", 1, body("a", 2, "first"), {}, {}, {}, event("a", 2)};
  up.request_id = "req-1";
  up.answer = "the first answer";
  CHECK(commit({up}) == std::vector<write_outcome>{write_outcome::committed});
  // The retry was computed on the offer as it is now (version 2): it would apply again.
  write_set again{"a", 2, body("a", 3, "second"), {}, {}, {}, event("a", 3)};
  again.request_id = "req-1";
  again.answer = "another answer";
  CHECK(commit({again}) == std::vector<write_outcome>{write_outcome::duplicate});
  CHECK(db.scalar("SELECT version FROM offers WHERE offer_id = 'a'") == "2");
  auto answer = find_answer(pool, "a", "req-1");
  REQUIRE(answer);
  REQUIRE(*answer);
  CHECK(**answer == "the first answer");
  CHECK_FALSE(*find_answer(pool, "a", "req-2"));
  // Twice in one batch: the second is the duplicate.
  write_set b1{"b", 1, body("b", 2, "once"), {}, {}, {}, event("b", 2)};
  b1.request_id = "req-9";
  auto b2 = b1;
  b2.expected_version = 2;
  CHECK(commit({b1, b2})
        == std::vector<write_outcome>{write_outcome::committed, write_outcome::duplicate});
  CHECK(db.scalar("SELECT version FROM offers WHERE offer_id = 'b'") == "2");
  // Every committed batch left its commit mark (for an outcome lost with the connection).
  CHECK(std::stoi(db.scalar("SELECT count(*) FROM commit_marks")) >= 3);
  // Old request ids go with the reaper.
  db.scalar("UPDATE offer_requests SET created_at = now() - interval '2 days'");
  auto reaped = reap_requests(pool, {1}, 86'400);
  REQUIRE(reaped);
  CHECK(*reaped == 2);
}
