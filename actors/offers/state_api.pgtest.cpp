// Stage states read and compare-and-set from outside (StateService's actor side), on one
// shard with a real PostgreSQL: versions, stale versions, and serialization with stage runs.
#include <doctest/doctest.h>

#include <atomic>

#include <google/protobuf/wrappers.pb.h>

#include "gost/testing/process.hpp"
#include "shard_fixture.hpp"

using namespace gost;
using namespace std::chrono_literals;
using gost::errc;

namespace {

int64_t value_of(const google::protobuf::Any& state) {
  google::protobuf::Int64Value v;
  state.UnpackTo(&v);
  return v.value();
}

std::string packed(int64_t n) {
  google::protobuf::Int64Value v;
  v.set_value(n);
  google::protobuf::Any a;
  a.PackFrom(v);
  return a.SerializeAsString();
}

/// Runs only when someone set its state to 1 ("requested") and then marks it 2 ("done").
struct gate final : stage {
  decision should_process(const v1::Offer&, const google::protobuf::Any* st) const override {
    return st != nullptr && value_of(*st) == 1 ? decision::process() : decision::skip();
  }
  stage_result process(const v1::Offer&, const google::protobuf::Any* st) const override {
    stage_result r;
    if (st != nullptr && value_of(*st) == 1) {
      r.state.emplace();
      r.state->ParseFromString(packed(2));
    }
    return r;
  }
};

template <class Reply, class... Ts>
caf::expected<Reply> ask(shard_fixture& f, Ts&&... xs) {
  caf::scoped_actor self{*f.sys};
  caf::expected<Reply> out{caf::error{}};
  self->request(f.shard, 10s, std::forward<Ts>(xs)...)
    .receive([&](Reply& m) { out = std::move(m); }, [&](caf::error& e) { out = e; });
  return out;
}

caf::expected<state_read_msg> read(shard_fixture& f, const std::string& offer,
                                   const std::string& stage) {
  return ask<state_read_msg>(f, get_atom_v, state_atom_v, offer, stage);
}

caf::expected<state_update_msg> update(shard_fixture& f, const std::string& offer,
                                       const std::string& stage, int64_t value, int64_t expected) {
  return ask<state_update_msg>(f, update_atom_v, state_atom_v, offer, stage, packed(value),
                               expected, request_id{});
}

const std::string outbox_events_sql = "SELECT coalesce(sum(events), 0) FROM outbox_batches";

} // namespace

TEST_CASE("a stage state is read and compare-and-set through the offer actor") {
  auto reg = std::make_shared<stage_registry>();
  reg->add("gate", std::make_shared<gate>());
  shard_fixture f{60s, reg};
  REQUIRE(f.ask(create_atom_v, std::string{"o1"}, offer_msg{new_offer("o1")}, request_id{}));

  // Never stored: version 0, no state.
  auto r0 = read(f, "o1", "gate");
  REQUIRE(r0);
  CHECK(r0->value.version() == 0);
  CHECK_FALSE(r0->value.has_state());

  // Compare-and-set from version 0. The stage is asked with its new state, runs, and stores
  // "done": a second write of the state.
  auto u1 = update(f, "o1", "gate", 1, 0);
  REQUIRE(u1);
  CHECK(u1->value.updated());
  CHECK(u1->value.version() == 1);
  REQUIRE(testing::eventually(10s, [&] {
    return f.db.scalar("SELECT state_version FROM stage_states WHERE offer_id = 'o1'") == "2";
  }));
  auto r2 = read(f, "o1", "gate");
  REQUIRE(r2);
  CHECK(r2->value.version() == 2);
  CHECK(value_of(r2->value.state()) == 2);

  SUBCASE("a stale version changes nothing and says which version is current") {
    auto events = f.db.scalar(outbox_events_sql);
    auto stale = update(f, "o1", "gate", 7, 1);
    REQUIRE(stale);
    CHECK_FALSE(stale->value.updated());
    CHECK(stale->value.version() == 2);
    CHECK(f.db.scalar("SELECT state_version FROM stage_states WHERE offer_id = 'o1'") == "2");
    CHECK(value_of(read(f, "o1", "gate")->value.state()) == 2);
    CHECK(f.db.scalar(outbox_events_sql) == events); // nothing written, no event
  }
  SUBCASE("an update at the current version is stored and announced") {
    auto events = std::stoi(f.db.scalar(outbox_events_sql));
    auto u = update(f, "o1", "gate", 5, 2);
    REQUIRE(u);
    CHECK(u->value.updated());
    CHECK(u->value.version() == 3);
    CHECK(std::stoi(f.db.scalar(outbox_events_sql)) == events + 1);
    // The offer itself did not change.
    CHECK(f.db.scalar("SELECT version FROM offers WHERE offer_id = 'o1'") == "1");
    // What an actor loads later: the stored state at version 3.
    auto stored = persistence::load_states(*f.pool, "o1");
    REQUIRE(stored);
    REQUIRE(stored->size() == 1);
    CHECK(stored->front().version == 3);
    CHECK(stored->front().bytes == packed(5));
  }
  SUBCASE("unknown stages and offers are refused") {
    auto unknown = update(f, "o1", "no-such-stage", 1, 0);
    REQUIRE_FALSE(unknown);
    CHECK(unknown.error() == errc::invalid_argument);
    CHECK(f.db.scalar("SELECT count(*) FROM stage_states WHERE stage_id = 'no-such-stage'") == "0");
    auto missing = update(f, "nope", "gate", 1, 0);
    REQUIRE_FALSE(missing);
    CHECK(missing.error() == errc::not_found);
    auto missing_read = read(f, "nope", "gate");
    REQUIRE_FALSE(missing_read);
    CHECK(missing_read.error() == errc::not_found);
  }
}

TEST_CASE("a state update waits for a running stage of the same offer") {
  // The stage holds its run until the test lets it go; the update sent meanwhile must be
  // applied after the run's commit, so a client that read version 0 before the run loses.
  struct slow final : stage {
    mutable std::atomic<bool> started{false};
    mutable std::atomic<bool> release{false};
    decision should_process(const v1::Offer&, const google::protobuf::Any* st) const override {
      return st == nullptr ? decision::process() : decision::skip();
    }
    stage_result process(const v1::Offer&, const google::protobuf::Any*) const override {
      started = true;
      testing::eventually(10s, [&] { return release.load(); });
      stage_result r;
      r.state.emplace();
      r.state->ParseFromString(packed(10));
      return r;
    }
  };
  auto impl = std::make_shared<slow>();
  auto reg = std::make_shared<stage_registry>();
  stage_options opts;
  opts.blocking = true;
  opts.pool_workers = 1;
  reg->add("slow", impl, opts);
  shard_fixture f{60s, reg};
  REQUIRE(f.ask(create_atom_v, std::string{"o1"}, offer_msg{new_offer("o1")}, request_id{}));
  REQUIRE(testing::eventually(10s, [&] { return impl->started.load(); }));

  // The update is sent now and answered later. The shard handles its mailbox in order and
  // answers a residency query itself: once it answered one sent after the update, it has handed
  // the update to the offer actor, which holds it back until the run's commit.
  caf::scoped_actor client{*f.sys};
  auto pending = client->request(f.shard, 10s, update_atom_v, state_atom_v, std::string{"o1"},
                                 std::string{"slow"}, packed(99), int64_t{0}, request_id{});
  caf::scoped_actor probe{*f.sys};
  bool handed_over = false;
  probe->request(f.shard, 10s, get_atom_v, resident_atom_v, std::string{"o1"})
    .receive([&](offer_actor& a) { handed_over = static_cast<bool>(a); },
             [&](caf::error& e) { FAIL("residency query failed: " << f.sys->render(e)); });
  REQUIRE(handed_over);
  impl->release = true;
  caf::expected<state_update_msg> raced{caf::error{}};
  pending.receive([&](state_update_msg& m) { raced = std::move(m); },
                  [&](caf::error& e) { raced = e; });
  REQUIRE(raced);
  CHECK_FALSE(raced->value.updated());
  CHECK(raced->value.version() == 1); // the run's write came first
  auto now = read(f, "o1", "slow");
  REQUIRE(now);
  CHECK(value_of(now->value.state()) == 10);
  auto retried = update(f, "o1", "slow", 99, 1);
  REQUIRE(retried);
  CHECK(retried->value.updated());
  CHECK(retried->value.version() == 2);
  CHECK(f.db.scalar("SELECT state_version FROM stage_states WHERE offer_id = 'o1'") == "2");
}
