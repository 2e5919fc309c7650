// Durable entities' asks and named timers (migration 0020) on the real PostgreSQL: a named
// timer set again replaces the pending one (one row, the new due time and payload), a cancel
// deletes it and the entity's queue entry follows; an ask's answer is kept with its request id
// and a second write with that id is a duplicate that changes nothing; an event's write moves
// its entity's state, tag and queue entry in one update, and one load reads them back.
#include <doctest/doctest.h>

#include "gost/persistence/entities/entities.hpp"
#include "gost/persistence/offers/write_behind.hpp"
#include "pg_fixture.hpp"

using namespace gost::persistence;

namespace {

const std::string kind = "watch.list";

entity_event_out timer(const std::string& id, const std::string& name, int64_t due,
                       std::string payload) {
  entity_event_out e;
  e.kind = kind;
  e.entity_id = id;
  e.due_at_us = due;
  e.payload = std::move(payload);
  e.timer = name;
  return e;
}

entity_write event_of(const std::string& id, int64_t expected_version) {
  entity_write w;
  w.kind = kind;
  w.entity_id = id;
  w.expected_version = expected_version;
  return w;
}

struct entities_db : migrated_db {
  int64_t epoch = 0;
  entities_db() {
    auto epochs = acquire_all_leases(pool, "test-node", 1);
    REQUIRE(epochs);
    epoch = (*epochs)[0];
  }
  write_outcome commit(entity_write w) {
    auto out = commit_entity_writes(pool, {{0, epoch, std::move(w)}}, "test-node");
    REQUIRE(out);
    return out->front();
  }
  entity_row load(const std::string& id, int64_t now_us) {
    auto rows = load_entities(pool, {entity_key(kind, id)}, now_us, 8);
    REQUIRE(rows);
    return rows->front();
  }
};

} // namespace

TEST_CASE_FIXTURE(entities_db, "an entity write is fenced when the lease at its epoch is owned by "
                               "another node: the owner is compared too (ADR 0023 §6)") {
  auto w = event_of("f1", -1);
  w.events.push_back(timer("f1", "", 5'000, "due"));
  db.scalar("UPDATE shard_leases SET owner = 'other-node' WHERE shard = 0");
  CHECK(commit(w) == write_outcome::fenced);
  CHECK(db.scalar("SELECT count(*) FROM entities WHERE entity_id = 'f1'") == "0");
  db.scalar("UPDATE shard_leases SET owner = 'test-node' WHERE shard = 0");
  CHECK(commit(w) == write_outcome::committed);
  CHECK(db.scalar("SELECT count(*) FROM entities WHERE entity_id = 'f1'") == "1");
}

TEST_CASE_FIXTURE(entities_db, "a named timer set again replaces the pending one; a cancel "
                               "deletes it; unnamed events stay as they are") {
  auto w = event_of("l1", -1);
  w.events.push_back(timer("l1", "sweep", 5'000, "first"));
  w.events.push_back(timer("l1", "remind", 9'000, "remind"));
  entity_event_out plain = timer("l1", "", 7'000, "plain");
  w.events.push_back(plain);
  CHECK(commit(w) == write_outcome::committed);
  auto row = load("l1", 0);
  CHECK(row.pending == 3);
  CHECK(row.next_due_us == 5'000);
  REQUIRE(row.timers.size() == 2);
  CHECK(row.timers[0].name == "remind");
  CHECK(row.timers[0].due_at_us == 9'000);
  CHECK(row.timers[1].name == "sweep");
  CHECK(row.timers[1].due_at_us == 5'000);

  // Set again (later, another payload): still one "sweep", moved; the entity's queue entry with
  // it.
  auto again = event_of("l1", -1);
  again.events.push_back(timer("l1", "sweep", 8'000, "second"));
  CHECK(commit(again) == write_outcome::committed);
  row = load("l1", 10'000);
  CHECK(row.pending == 3);
  CHECK(row.next_due_us == 7'000);
  REQUIRE(row.due.size() == 3);
  CHECK(row.due[0].payload == "plain");
  CHECK(row.due[0].timer.empty());
  CHECK(row.due[1].payload == "second");
  CHECK(row.due[1].timer == "sweep");
  CHECK(row.due[2].timer == "remind");
  CHECK(db.scalar("SELECT due_at_us FROM entities WHERE entity_id = 'l1'") == "7000");

  // The handled timer is consumed and re-armed by its own event (delete, then insert); the
  // other is cancelled.
  auto fired = event_of("l1", 0);
  fired.new_state = "swept";
  fired.consumed_seq = row.due[1].seq;
  fired.events.push_back(timer("l1", "sweep", 20'000, "third"));
  fired.cancelled_timers.push_back("remind");
  fired.cancelled_timers.push_back("never-set");
  CHECK(commit(fired) == write_outcome::committed);
  row = load("l1", 30'000);
  CHECK(row.version == 1);
  CHECK(row.pending == 2);
  REQUIRE(row.timers.size() == 1);
  CHECK(row.timers[0].name == "sweep");
  CHECK(row.timers[0].due_at_us == 20'000);
  CHECK(db.scalar("SELECT count(*) FROM entity_events WHERE timer = 'sweep'") == "1");

  // Timers of different entities with one name are apart.
  auto other = event_of("l2", -1);
  other.events.push_back(timer("l2", "sweep", 1'000, "other"));
  CHECK(commit(other) == write_outcome::committed);
  CHECK(load("l1", 0).timers.size() == 1);
  CHECK(load("l2", 0).timers.size() == 1);
}

TEST_CASE_FIXTURE(entities_db, "an ask's answer is kept with its request id; a second write "
                               "with the id changes nothing and is a duplicate") {
  // The first ask of an entity never sent an event creates its row at version 1.
  auto ask = event_of("l1", 0);
  ask.new_state = "v1";
  ask.answer = entity_answer{"ask-1", std::string{"reply-bytes"}, 0, {}, 1};
  CHECK(commit(ask) == write_outcome::committed);
  CHECK(db.scalar("SELECT version FROM entities WHERE entity_id = 'l1'") == "1");
  auto kept = find_entity_answer(pool, kind, "l1", "ask-1");
  REQUIRE(kept);
  REQUIRE(*kept);
  REQUIRE((*kept)->reply);
  CHECK(*(*kept)->reply == "reply-bytes");
  CHECK((*kept)->refusal_code == 0);
  CHECK((*kept)->version == 1);

  // The retry, computed on the new version: a duplicate; neither its state nor its events land.
  auto retry = event_of("l1", 1);
  retry.new_state = "v2";
  retry.events.push_back(timer("l1", "t", 0, "x"));
  retry.answer = entity_answer{"ask-1", std::string{"other"}, 0, {}, 2};
  CHECK(commit(retry) == write_outcome::duplicate);
  CHECK(load("l1", 0).version == 1);
  CHECK(db.scalar("SELECT count(*) FROM entity_events WHERE timer = 't'") == "0");
  CHECK(*(*find_entity_answer(pool, kind, "l1", "ask-1"))->reply == "reply-bytes");

  // A refusal: kept without a reply; a stale version is a conflict, and keeps nothing.
  auto no = event_of("l1", 1);
  no.answer = entity_answer{"ask-2", std::nullopt, 11, "the list is full", 1};
  CHECK(commit(no) == write_outcome::committed);
  auto refusal = find_entity_answer(pool, kind, "l1", "ask-2");
  REQUIRE(refusal);
  REQUIRE(*refusal);
  CHECK_FALSE((*refusal)->reply);
  CHECK((*refusal)->refusal_code == 11);
  CHECK((*refusal)->refusal == "the list is full");
  auto stale = event_of("l1", 0);
  stale.answer = entity_answer{"ask-3", std::nullopt, 11, "stale", 0};
  CHECK(commit(stale) == write_outcome::conflict);
  auto none = find_entity_answer(pool, kind, "l1", "ask-3");
  REQUIRE(none);
  CHECK_FALSE(*none);
  // A sent event's request id is not an ask's answer.
  auto sent = event_of("l1", -1);
  auto e = timer("l1", "", 0, "sent");
  e.request_id = "send-1";
  sent.events.push_back(e);
  CHECK(commit(sent) == write_outcome::committed);
  auto not_ask = find_entity_answer(pool, kind, "l1", "send-1");
  REQUIRE(not_ask);
  CHECK_FALSE(*not_ask);
}

TEST_CASE_FIXTURE(entities_db, "sent events with request ids commit in one batch: the first of "
                               "each id is stored once, a repeat in the batch or after stores "
                               "nothing, plain events and timers of the batch beside them") {
  auto sent = [&](const std::string& id, const std::string& request_id, std::string payload) {
    auto w = event_of(id, -1);
    auto e = timer(id, "", 1'000, std::move(payload));
    e.request_id = request_id;
    w.events.push_back(e);
    return fenced_write<entity_write>{0, epoch, std::move(w)};
  };
  std::vector<fenced_write<entity_write>> batch{
    sent("r1", "init", "r1-first"), sent("r1", "init", "r1-repeat"), // a client's retry
    sent("r2", "init", "r2"), sent("r2", "other", "r2-other"), sent("r3", "init", "r3")};
  auto mixed = event_of("r3", -1);
  mixed.events.push_back(timer("r3", "", 2'000, "r3-plain"));
  mixed.events.push_back(timer("r3", "sweep", 3'000, "r3-timer"));
  batch.push_back({0, epoch, mixed});
  auto out = commit_entity_writes(pool, batch, "test-node");
  REQUIRE(out);
  for (auto o : *out)
    CHECK(o == write_outcome::committed);
  auto payloads = [&](const std::string& id) {
    return db.scalar("SELECT string_agg(convert_from(payload, 'UTF8'), ',' ORDER BY due_at_us,"
                     " payload) FROM entity_events WHERE entity_id = '"
                     + id + "'");
  };
  CHECK(payloads("r1") == "r1-first");
  CHECK(payloads("r2") == "r2,r2-other");
  CHECK(payloads("r3") == "r3,r3-plain,r3-timer");
  // Each request id's row names its event's seq.
  CHECK(db.scalar("SELECT count(*) FROM entity_requests q JOIN entity_events e USING (kind,"
                  " entity_id, seq) WHERE q.entity_id IN ('r1', 'r2', 'r3')")
        == "4");
  CHECK(load("r3", 0).next_due_us == 1'000);

  // Sent again in a later batch (an answer lost): nothing more stored.
  out = commit_entity_writes(pool, {sent("r1", "init", "r1-late"), sent("r2", "other", "x")},
                             "test-node");
  REQUIRE(out);
  CHECK(payloads("r1") == "r1-first");
  CHECK(payloads("r2") == "r2,r2-other");
  CHECK(db.scalar("SELECT count(*) FROM entity_requests") == "4");
}

TEST_CASE_FIXTURE(entities_db, "the shard's due read answers its page, then the first entry past "
                               "the window as a hint") {
  auto soon = event_of("d1", -1);
  soon.events.push_back(timer("d1", "", 100, "soon"));
  CHECK(commit(soon) == write_outcome::committed);
  auto later = event_of("d2", -1);
  later.events.push_back(timer("d2", "", 5'000, "later"));
  CHECK(commit(later) == write_outcome::committed);
  auto due = due_entities(pool, 0, 1'000, 10);
  REQUIRE(due);
  REQUIRE(due->size() == 2);
  CHECK(due->front().entity_id == entity_key(kind, "d1"));
  CHECK(due->back().entity_id == entity_key(kind, "d2")); // the hint: due 5000, past 1000
  CHECK(due->back().due_at_us == 5'000);
  auto all = due_entities(pool, 0, 10'000, 10);
  REQUIRE(all);
  CHECK(all->size() == 2); // both within the window: no hint
}

TEST_CASE_FIXTURE(entities_db, "an event's write moves its entity's state, tag and queue entry "
                               "together; a send to another entity moves only that one's entry") {
  // A send creates the row: no state yet, its queue entry the event's due time.
  auto send = event_of("a", -1);
  send.events.push_back(timer("a", "", 5'000, "first"));
  CHECK(commit(send) == write_outcome::committed);
  CHECK(db.scalar("SELECT version || ':' || coalesce(tag, '-') || ':' || due_at_us FROM entities"
                  " WHERE entity_id = 'a'")
        == "0:-:5000");
  auto row = load("a", 5'000);
  REQUIRE(row.due.size() == 1);

  // The event handled: new state and tag, the event consumed, one to itself later and one to
  // `b` (a new row): a's entry is its own next event, b's the one sent to it.
  auto handled = event_of("a", 0);
  handled.new_state = "s1";
  handled.tag = "waiting";
  handled.consumed_seq = row.due[0].seq;
  handled.events.push_back(timer("a", "", 9'000, "later"));
  handled.events.push_back(timer("b", "", 3'000, "to-b"));
  CHECK(commit(handled) == write_outcome::committed);
  CHECK(db.scalar("SELECT version || ':' || encode(state, 'escape') || ':' || tag || ':'"
                  " || due_at_us FROM entities WHERE entity_id = 'a'")
        == "1:s1:waiting:9000");
  CHECK(db.scalar("SELECT version || ':' || coalesce(tag, '-') || ':' || (state IS NULL) || ':'"
                  " || due_at_us FROM entities WHERE entity_id = 'b'")
        == "0:-:true:3000");
  auto stamped = db.scalar("SELECT updated_at FROM entities WHERE entity_id = 'a'");

  // A send alone: a's entry moves earlier; its state, version, tag and update time stay.
  auto poke = event_of("a", -1);
  poke.events.push_back(timer("a", "", 4'000, "poke"));
  CHECK(commit(poke) == write_outcome::committed);
  CHECK(db.scalar("SELECT version || ':' || encode(state, 'escape') || ':' || tag || ':'"
                  " || due_at_us FROM entities WHERE entity_id = 'a'")
        == "1:s1:waiting:4000");
  CHECK(db.scalar("SELECT updated_at FROM entities WHERE entity_id = 'a'") == stamped);

  // One load: the state, the pending events counted, those due now in order.
  row = load("a", 10'000);
  CHECK(row.found);
  CHECK(row.version == 1);
  REQUIRE(row.state);
  CHECK(*row.state == "s1");
  CHECK(row.pending == 2);
  CHECK(row.next_due_us == 4'000);
  REQUIRE(row.due.size() == 2);
  CHECK(row.due[0].payload == "poke");
  CHECK(row.due[1].payload == "later");
  // Nothing due yet: the row and its counts, no due events; an unknown entity: not found.
  row = load("a", 1'000);
  CHECK(row.pending == 2);
  CHECK(row.due.empty());
  row = load("nobody", 10'000);
  CHECK_FALSE(row.found);
  CHECK(row.pending == 0);

  // The last event consumed: no entry left.
  row = load("b", 10'000);
  REQUIRE(row.due.size() == 1);
  auto last = event_of("b", 0);
  last.new_state = "done";
  last.consumed_seq = row.due[0].seq;
  CHECK(commit(last) == write_outcome::committed);
  CHECK(db.scalar("SELECT (due_at_us IS NULL) || ':' || version FROM entities"
                  " WHERE entity_id = 'b'")
        == "true:1");
}

TEST_CASE_FIXTURE(entities_db, "an event to an entity of another shard group is kept in "
                               "entity_forwards in the sender's transaction, read by the sending "
                               "shard, deleted once delivered, and held back after a failure") {
  auto w = event_of("sender", 0);
  w.new_state = "s1";
  entity_event_out far;
  far.kind = "other.kind";
  far.entity_id = "far-away";
  far.shard = 5; // not written here: its row lives in another database
  far.due_at_us = 1'000;
  far.payload = "p1";
  far.forward = true;
  entity_event_out near = far;
  near.entity_id = "near";
  near.forward = false;
  w.events = {far, near};
  auto second = far;
  second.entity_id = "far-two";
  second.payload = "p2";
  w.events.push_back(second);
  REQUIRE(commit(std::move(w)) == write_outcome::committed);
  // Only the near one is an event here (with its target's row); the others are forwards.
  CHECK(db.scalar("SELECT count(*) FROM entity_events WHERE kind = 'other.kind'") == "1");
  CHECK(db.scalar("SELECT count(*) FROM entities WHERE entity_id LIKE 'far%'") == "0");
  CHECK(db.scalar("SELECT count(*) FROM entity_forwards") == "2");
  CHECK(read_entity_forwards(pool, {1, 2}, 10)->empty()); // other sending shards'
  auto rows = read_entity_forwards(pool, {0}, 10);
  REQUIRE(rows);
  REQUIRE(rows->size() == 2);
  CHECK((*rows)[0].shard == 0);
  CHECK((*rows)[0].entity_id == "far-away");
  CHECK((*rows)[0].payload == "p1");
  CHECK((*rows)[0].due_at_us == 1'000);
  CHECK((*rows)[1].entity_id == "far-two");
  CHECK((*rows)[0].request_id != (*rows)[1].request_id);
  CHECK((*rows)[0].request_id.rfind("gost.forward/", 0) == 0);
  CHECK(read_entity_forwards(pool, {0}, 1)->size() == 1);

  // A fenced write keeps nothing.
  auto fenced = event_of("sender2", -1);
  fenced.events = {far};
  auto out = commit_entity_writes(pool, {{0, epoch + 7, fenced}}, "test-node");
  REQUIRE(out);
  CHECK(out->front() == write_outcome::fenced);
  CHECK(db.scalar("SELECT count(*) FROM entity_forwards") == "2");

  // The first delivered, the second failed: it waits (a second at least) with its error.
  REQUIRE_FALSE(
    settle_entity_forwards(pool, {(*rows)[0].request_id}, {{(*rows)[1].request_id, "no owner"}}));
  CHECK(db.scalar("SELECT count(*) FROM entity_forwards") == "1");
  CHECK(db.scalar("SELECT attempts || ' ' || last_error FROM entity_forwards") == "1 no owner");
  CHECK(read_entity_forwards(pool, {0}, 10)->empty());
  db.scalar("UPDATE entity_forwards SET retry_at = now()");
  auto again = read_entity_forwards(pool, {0}, 10);
  REQUIRE(again);
  REQUIRE(again->size() == 1);
  CHECK(again->front().attempts == 1);
}
