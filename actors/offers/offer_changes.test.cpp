#include <doctest/doctest.h>

#include <google/protobuf/util/message_differencer.h>
#include <google/protobuf/wrappers.pb.h>

#include "gost/offers/offer_changes.hpp"
#include "gost/offers/protocol.hpp"
#include "gost/v1/events.pb.h"

using namespace gost;

namespace {

const auto t0 = std::chrono::system_clock::time_point{std::chrono::seconds{1'700'000'000}};
const offer_limits limits;

v1::Offer content() {
  v1::Offer o;
  o.set_seller_id("s1");
  o.set_title("bike");
  return o;
}

struct wants_everything final : stage {
  decision should_process(const v1::Offer&, const google::protobuf::Any*) const override {
    return decision::process();
  }
  stage_result process(const v1::Offer&, const google::protobuf::Any*) const override { return {}; }
};

google::protobuf::Any counter(int64_t n) {
  google::protobuf::Int64Value v;
  v.set_value(n);
  google::protobuf::Any a;
  a.PackFrom(v);
  return a;
}

} // namespace

TEST_CASE("the outbox event built from the body equals the event serialized in full") {
  offer_context ctx;
  ctx.states["a"].value = counter(1);
  ctx.states["b"].value = counter(2);
  auto o = content();
  o.set_id("o1");
  o.set_version(3);
  o.set_status(v1::OFFER_STATUS_INACTIVE);
  auto bytes = saved_event(o.SerializeAsString(), ctx, {{"b", counter(7).SerializeAsString()}},
                           false, "b", v1::OFFER_STATUS_ACTIVE);
  v1::OfferSaved got;
  REQUIRE(got.ParseFromString(bytes));
  v1::OfferSaved want;
  *want.mutable_offer() = o;
  (*want.mutable_states())["a"] = counter(1);
  (*want.mutable_states())["b"] = counter(7); // the new state replaces the held one
  want.set_changed_by("b");
  want.set_previous_status(v1::OFFER_STATUS_ACTIVE);
  CHECK(google::protobuf::util::MessageDifferencer::Equals(got, want));
}

TEST_CASE("a create is an insert with its body, the stages that want it and its event") {
  stage_registry reg;
  reg.add("any", std::make_shared<wants_everything>());
  offer_entity e{"o1"};
  e.committed(std::nullopt);
  offer_context ctx;
  auto c = prepare_create({e, ctx, reg, t0, limits}, content());
  REQUIRE(c);
  CHECK(c->ws.op == persistence::offer_op::insert);
  CHECK(c->ws.key.seller_id == "s1");
  REQUIRE(c->ws.new_body);
  v1::Offer body;
  REQUIRE(body.ParseFromString(*c->ws.new_body));
  CHECK(body.id() == "o1");
  CHECK(body.version() == 1);
  REQUIRE(c->ws.enqueue.size() == 1);
  CHECK(c->ws.enqueue.front().lane == "any");
  v1::OfferSaved saved;
  REQUIRE(saved.ParseFromString(*c->ws.outbox));
  CHECK(saved.offer().id() == "o1");
  CHECK(saved.changed_by() == "api");
  CHECK(saved.previous_status() == v1::OFFER_STATUS_UNSPECIFIED); // created by this change
  REQUIRE(c->next);
  CHECK(c->next->title() == "bike");
}

TEST_CASE("an update's event carries the status the offer had before it") {
  stage_registry reg;
  offer_entity e{"o1"};
  auto active = content();
  active.set_status(v1::OFFER_STATUS_ACTIVE);
  e.committed(*offer_entity{"o1"}.prepare_create(active, t0, limits));
  offer_context ctx;
  v1::Offer banned;
  banned.set_status(v1::OFFER_STATUS_BANNED);
  auto u = prepare_update({e, ctx, reg, t0, limits}, banned, any_version, "status");
  REQUIRE(u);
  v1::OfferSaved saved;
  REQUIRE(saved.ParseFromString(*u->ws.outbox));
  CHECK(saved.offer().status() == v1::OFFER_STATUS_BANNED);
  CHECK(saved.previous_status() == v1::OFFER_STATUS_ACTIVE);
}

TEST_CASE("an update that changes the seller key re-keys the row; one that keeps it does not") {
  stage_registry reg;
  offer_entity e{"o1"};
  auto stored = content();
  stored.set_namespace_("shop");
  stored.set_external_id("sku-1");
  e.committed(*offer_entity{"o1"}.prepare_create(stored, t0, limits));
  offer_context ctx;
  v1::Offer title_only;
  title_only.set_title("red bike");
  auto same = prepare_update({e, ctx, reg, t0, limits}, title_only, any_version, "title");
  REQUIRE(same);
  CHECK_FALSE(same->ws.rekey);
  for (auto field : {"seller_id", "namespace", "external_id"}) {
    CAPTURE(field);
    v1::Offer moved = *e.current();
    std::string f = field;
    if (f == "seller_id")
      moved.set_seller_id("s2");
    else if (f == "namespace")
      moved.set_namespace_("other");
    else
      moved.set_external_id("sku-2");
    auto u = prepare_update({e, ctx, reg, t0, limits}, moved, any_version, field);
    REQUIRE(u);
    CHECK(u->ws.rekey);
    CHECK(u->ws.key.seller_id == moved.seller_id());
    CHECK(u->ws.key.ns == moved.namespace_());
    CHECK(u->ws.key.external_id == moved.external_id());
    CHECK(u->ws.previous_seller == stored.seller_id()); // the old key's home is checked too
  }
}

TEST_CASE("content rules hold for the offer as stored: a masked update is checked merged") {
  stage_registry reg;
  offer_entity e{"o1"};
  auto stored = *offer_entity{"o1"}.prepare_create(content(), t0, limits);
  e.committed(stored);
  offer_context ctx;
  // Only the title changes: the stored seller_id keeps the merged offer valid.
  v1::Offer title_only;
  title_only.set_title("red bike");
  auto ok = prepare_update({e, ctx, reg, t0, limits}, title_only, any_version, "title");
  REQUIRE(ok);
  CHECK(ok->next->seller_id() == "s1");
  CHECK(ok->next->title() == "red bike");
  // A mask naming seller_id without a value clears it: refused, naming the field.
  auto bad = prepare_update({e, ctx, reg, t0, limits}, title_only, any_version, "seller_id");
  REQUIRE_FALSE(bad);
  CHECK(bad.error() == errc::invalid_argument);
  CHECK(error_message(bad.error()).find("seller_id") != std::string::npos);
  // So is a create breaking a rule.
  offer_entity fresh{"o2"};
  fresh.committed(std::nullopt);
  auto no_seller = content();
  no_seller.clear_seller_id();
  CHECK(prepare_create({fresh, ctx, reg, t0, limits}, no_seller).error() == errc::invalid_argument);
}

TEST_CASE(
  "a state update with a stale version writes nothing; a current one writes state and event") {
  stage_registry reg;
  reg.add("any", std::make_shared<wants_everything>());
  offer_entity e{"o1"};
  e.committed(*offer_entity{"o1"}.prepare_create(content(), t0, limits));
  offer_context ctx;
  ctx.states["any"].value = counter(1);
  ctx.states["any"].version = 4;
  auto stale =
    prepare_state_update({e, ctx, reg, t0, limits}, "any", counter(2).SerializeAsString(), 3);
  REQUIRE(stale);
  CHECK(writes_nothing(stale->ws));
  auto fresh =
    prepare_state_update({e, ctx, reg, t0, limits}, "any", counter(2).SerializeAsString(), 4);
  REQUIRE(fresh);
  REQUIRE(fresh->ws.states.size() == 1);
  v1::OfferSaved saved;
  REQUIRE(saved.ParseFromString(*fresh->ws.outbox));
  google::protobuf::Int64Value v;
  REQUIRE(saved.states().at("any").UnpackTo(&v));
  CHECK(v.value() == 2);
  CHECK(saved.changed_by() == "state-api:any");
  CHECK(prepare_state_update({e, ctx, reg, t0, limits}, "nope", {}, 0).error()
        == errc::invalid_argument);
}

TEST_CASE("a requeue enqueues the stage due now and changes nothing else; a missing offer or an "
          "unknown stage is refused") {
  stage_registry reg;
  reg.add("any", std::make_shared<wants_everything>());
  offer_entity e{"o1"};
  e.committed(*offer_entity{"o1"}.prepare_create(content(), t0, limits));
  offer_context ctx;
  auto r = prepare_requeue({e, ctx, reg, t0, limits}, "any");
  REQUIRE(r);
  CHECK(r->ws.op == persistence::offer_op::none);
  REQUIRE(r->ws.enqueue.size() == 1);
  CHECK(r->ws.enqueue[0].lane == "any");
  CHECK(r->ws.enqueue[0].entity_id == "o1");
  CHECK(r->ws.enqueue[0].due_at_us == to_us(t0));
  CHECK_FALSE(r->ws.new_body);
  CHECK_FALSE(r->ws.outbox);
  CHECK(r->ws.states.empty());
  CHECK_FALSE(r->next);
  CHECK_FALSE(writes_nothing(r->ws));
  auto bad = prepare_requeue({e, ctx, reg, t0, limits}, "nope");
  REQUIRE_FALSE(bad);
  CHECK(bad.error() == errc::invalid_argument);
  CHECK(error_message(bad.error()).find("stage_id `nope`") != std::string::npos);
  offer_entity gone{"o2"};
  gone.committed(std::nullopt);
  CHECK(prepare_requeue({gone, ctx, reg, t0, limits}, "any").error() == errc::not_found);
}
