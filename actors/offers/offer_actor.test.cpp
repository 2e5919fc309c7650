// The offer actor behind its shard on CAF's test scheduler, with a fake store and a fake writer:
// what it does when a write-set loses its version check, is fenced, or its batch fails. The
// same paths against PostgreSQL are in offer_actor.pgtest.cpp; here the answers are chosen.
#include <doctest/doctest.h>

#include <deque>
#include <map>

#include "gost/offers/spawn.hpp"
#include "gost/testing/caf_fixture.hpp"

using namespace gost;
using persistence::write_outcome;

namespace {

/// The offer store (store_actor) on the test scheduler: each load of an offer answers the next
/// snapshot put for it (the last one again once they are used up; none: not found).
class fake_offer_store {
public:
  explicit fake_offer_store(testing::caf_fixture& fx) : book_(std::make_shared<book>()) {
    handle_ = fx.spawn(
      [](std::shared_ptr<book> b) -> store_actor::behavior_type {
        return {
          [b](load_atom, const std::string& id) -> offer_snapshot {
            b->loaded.push_back(id);
            auto& q = b->snapshots[id];
            if (q.empty())
              return {};
            auto snap = q.front();
            if (q.size() > 1)
              q.pop_front();
            return snap;
          },
          [](due_atom, uint32_t, int64_t, uint32_t, const queue_entries&) -> queue_entries {
            return {};
          },
          [](scan_atom, uint32_t, const std::string&, uint32_t) -> offer_snapshots { return {}; },
          [](load_atom, scan_atom, const std::string&, uint32_t) {
            return caf::make_result(std::string{}, int64_t{0}, true);
          },
          [](update_atom, scan_atom, const std::string&, uint32_t, const std::string&, int64_t,
             bool) {},
          [](find_atom, const std::string&, const std::string&, const std::string&)
            -> caf::result<std::string> { return make_error(errc::not_found, "no such key"); },
          [](find_atom, const std::string&, request_id) -> std::string { return {}; },
          [](list_atom, const std::string&, bool, const std::string&, const std::string&,
             uint32_t) -> persistence::seller_page { return {}; },
          [](delete_atom, const std::string&, const std::string&, const std::string&,
             const std::string&) { return false; },
        };
      },
      book_);
  }

  operator store_actor() const { return handle_; }
  void will_load(const v1::Offer& o) {
    offer_snapshot snap;
    snap.found = true;
    snap.offer = o;
    book_->snapshots[o.id()].push_back(std::move(snap));
  }
  const std::vector<std::string>& loaded() const { return book_->loaded; }

private:
  struct book {
    std::map<std::string, std::deque<offer_snapshot>> snapshots;
    std::vector<std::string> loaded;
  };
  std::shared_ptr<book> book_;
  store_actor handle_;
};

v1::Offer offer(const std::string& id, int64_t version, const std::string& title) {
  v1::Offer o;
  o.set_id(id);
  o.set_seller_id("s");
  o.set_title(title);
  o.set_version(version);
  return o;
}

struct offer_fixture : testing::caf_fixture {
  offer_fixture() : caf_fixture(&register_offer_types) {}

  fake_offer_store store{*this};
  testing::fake_writer<persistence::write_set> writer{*this};
  std::shared_ptr<node_stats> stats = std::make_shared<node_stats>();
  shard_actor shard;

  void start() {
    shard_options so;
    so.kit.shard = 3;
    so.kit.epoch = 5;
    so.store = store;
    so.writer = writer;
    so.stats = stats;
    so.kit.wall_clock = wall_clock();
    shard = keep(spawn_shard(sys, so));
    run();
  }

  caf::expected<offer_msg> update(const std::string& id, const std::string& title) {
    return ask(shard, update_atom_v, id, offer_msg{offer(id, 0, title)}, any_version, std::string{},
               request_id{});
  }
};

} // namespace

TEST_CASE_FIXTURE(offer_fixture,
                  "an update that lost its version check is redone on the reloaded offer") {
  store.will_load(offer("o1", 1, "t"));
  store.will_load(offer("o1", 2, "theirs")); // what another writer committed meanwhile
  writer.then(write_outcome::conflict);
  start();
  auto r = update("o1", "mine");
  REQUIRE(r);
  CHECK(r->value.version() == 3);
  CHECK(r->value.title() == "mine");
  CHECK(store.loaded() == std::vector<std::string>{"o1", "o1"});
  REQUIRE(writer.writes().size() == 2);
  CHECK(writer.writes()[0].ws.expected_version == 1);
  CHECK(writer.writes()[1].ws.expected_version == 2);
  CHECK(writer.writes()[1].shard == 3);
  CHECK(writer.writes()[1].epoch == 5);
  CHECK(stats->stage_conflicts.load() == 1);
  // The actor holds what was committed: a read answers from memory.
  auto got = ask(shard, get_atom_v, std::string{"o1"});
  REQUIRE(got);
  CHECK(got->value.version() == 3);
  CHECK(store.loaded().size() == 2);
}

TEST_CASE_FIXTURE(offer_fixture, "an update that keeps conflicting gives up with errc::conflict") {
  store.will_load(offer("o1", 1, "t"));
  writer.otherwise(write_outcome::conflict);
  start();
  auto r = update("o1", "mine");
  REQUIRE_FALSE(r);
  CHECK(r.error() == errc::conflict);
  CHECK(writer.writes().size() == 3); // the first try and two redos
  CHECK(store.loaded().size() == 3);
}

TEST_CASE_FIXTURE(offer_fixture,
                  "a fenced or failed write is reported, and the next request reloads") {
  store.will_load(offer("o1", 1, "t"));
  writer.then(write_outcome::fenced);
  writer.then(make_error(errc::unavailable, "database down"));
  start();
  auto fenced = update("o1", "a");
  REQUIRE_FALSE(fenced);
  CHECK(fenced.error() == errc::fenced);
  auto failed = update("o1", "b");
  REQUIRE_FALSE(failed);
  CHECK(failed.error() == errc::unavailable);
  CHECK(store.loaded().size() == 2); // each write's failure forgot the held offer
  auto third = update("o1", "c");
  REQUIRE(third);
  CHECK(third->value.version() == 2);
  CHECK(store.loaded().size() == 3);
}

TEST_CASE_FIXTURE(offer_fixture, "an update whose new seller key another offer holds answers "
                                 "already_exists naming the key, and is not redone") {
  store.will_load(offer("o1", 1, "t"));
  writer.then(write_outcome::key_taken);
  start();
  auto moved = offer("o1", 0, "t");
  moved.set_external_id("sku-9");
  auto r = ask(shard, update_atom_v, std::string{"o1"}, offer_msg{moved}, any_version,
               std::string{}, request_id{});
  REQUIRE_FALSE(r);
  CHECK(r.error() == errc::already_exists);
  CHECK(error_message(r.error()).find("external_id sku-9") != std::string::npos);
  REQUIRE(writer.writes().size() == 1);
  CHECK(writer.writes()[0].ws.rekey);
  CHECK(stats->stage_conflicts.load() == 0);
  // The held copy was forgotten: the next request reads the offer again.
  REQUIRE(ask(shard, get_atom_v, std::string{"o1"}));
  CHECK(store.loaded().size() == 2);
}

TEST_CASE_FIXTURE(offer_fixture, "an update changing the key of an offer stored outside its "
                                 "seller's home group answers failed_precondition, not redone") {
  store.will_load(offer("o1", 1, "t"));
  writer.then(write_outcome::key_elsewhere);
  start();
  auto moved = offer("o1", 0, "t");
  moved.set_seller_id("s-far");
  auto r = ask(shard, update_atom_v, std::string{"o1"}, offer_msg{moved}, any_version,
               std::string{}, request_id{});
  REQUIRE_FALSE(r);
  CHECK(r.error() == errc::failed_precondition);
  CHECK(error_message(r.error()).find("seller_id s-far") != std::string::npos);
  CHECK(error_message(r.error()).find("delete it and create it") != std::string::npos);
  REQUIRE(writer.writes().size() == 1);
  CHECK(writer.writes()[0].ws.rekey);
  CHECK(writer.writes()[0].ws.previous_seller == offer("o1", 1, "t").seller_id());
  CHECK(stats->stage_conflicts.load() == 0);
  REQUIRE(ask(shard, get_atom_v, std::string{"o1"}));
  CHECK(store.loaded().size() == 2); // the copy was forgotten
}

TEST_CASE_FIXTURE(offer_fixture, "a create whose seller's home shard moved meanwhile (a split) "
                                 "answers unavailable: a retry draws its id in the new group") {
  writer.then(write_outcome::home_moved);
  start();
  auto r =
    ask(shard, create_atom_v, std::string{"o1"}, offer_msg{offer("o1", 0, "t")}, request_id{});
  REQUIRE_FALSE(r);
  CHECK(r.error() == errc::unavailable);
  CHECK(error_message(r.error()).find("retry") != std::string::npos);
  REQUIRE(writer.writes().size() == 1);
  CHECK(stats->stage_conflicts.load() == 0);
}

TEST_CASE_FIXTURE(offer_fixture, "a create that loses its insert answers already_exists") {
  writer.then(write_outcome::conflict);
  start();
  auto r =
    ask(shard, create_atom_v, std::string{"o1"}, offer_msg{offer("o1", 0, "t")}, request_id{});
  REQUIRE_FALSE(r);
  CHECK(r.error() == errc::already_exists);
  REQUIRE(writer.writes().size() == 1);
  CHECK(writer.writes()[0].ws.op == persistence::offer_op::insert);
  CHECK(stats->stage_conflicts.load() == 0); // not redone
}
