#include <doctest/doctest.h>

#include <google/protobuf/wrappers.pb.h>

#include "gost/offers/stage_runner.hpp"
#include "gost/v1/events.pb.h"

using namespace gost;

namespace {

/// A configurable test stage.
struct probe final : stage {
  decision answer = decision::process();
  bool throws = false;
  std::vector<std::string> fields;
  stage_result result;
  decision should_process(const v1::Offer&, const google::protobuf::Any*) const override {
    if (throws)
      throw std::runtime_error("boom");
    return answer;
  }
  stage_result process(const v1::Offer&, const google::protobuf::Any*) const override {
    return result;
  }
  std::vector<std::string> interests() const override { return fields; }
};

v1::Offer offer() {
  v1::Offer o;
  o.set_id("o1");
  o.set_seller_id("s");
  o.set_title("bike");
  o.set_version(4);
  return o;
}

constexpr int64_t now = 1'000'000;

} // namespace

TEST_CASE("changed_fields names top-level fields, ignoring version and timestamps") {
  auto a = offer();
  auto b = a;
  b.set_version(9);
  b.mutable_updated_at()->set_seconds(77);
  CHECK(changed_fields(a, b).empty());
  b.set_title("red bike");
  b.mutable_price()->set_amount_minor(5);
  (*b.mutable_attributes())["color"] = "red";
  CHECK(changed_fields(a, b) == std::set<std::string>{"attributes", "price", "title"});
}

TEST_CASE("a stage that changes nothing writes nothing but its dequeue") {
  stage_registry reg;
  auto p = std::make_shared<probe>();
  reg.add("p", p);
  offer_context ctx;
  auto out = after_process(reg, "p", offer(), ctx, stage_result{}, now, {});
  CHECK_FALSE(out.offer_changed);
  CHECK_FALSE(out.state_changed);
  CHECK_FALSE(out.ws.new_body);
  CHECK(out.ws.states.empty());
  CHECK_FALSE(out.ws.outbox);
  CHECK(out.ws.dequeue == std::vector<std::string>{"p"});
  CHECK(out.ws.enqueue.empty());
  SUBCASE("returning the same offer and the same state is no change either") {
    google::protobuf::Any st;
    st.PackFrom(google::protobuf::Int64Value{});
    ctx.states["p"].value = st;
    stage_result same;
    same.offer = offer();
    same.state = st;
    auto again = after_process(reg, "p", offer(), ctx, same, now, {});
    CHECK_FALSE(again.offer_changed);
    CHECK_FALSE(again.state_changed);
    CHECK_FALSE(again.ws.outbox);
  }
}

TEST_CASE("a stage's result keeps the offer's seller key") {
  stage_registry reg;
  auto p = std::make_shared<probe>();
  reg.add("p", p);
  offer_context ctx;
  stage_result r;
  r.offer = offer();
  r.offer->set_seller_id("someone-else");
  r.offer->set_namespace_("other");
  r.offer->set_external_id("sku-x");
  auto only_key = after_process(reg, "p", offer(), ctx, r, now, {});
  CHECK_FALSE(only_key.offer_changed); // nothing else changed: nothing to write
  r.offer->set_title("renamed");
  auto out = after_process(reg, "p", offer(), ctx, r, now, {});
  REQUIRE(out.offer_changed);
  CHECK(out.offer->title() == "renamed");
  CHECK(out.offer->seller_id() == offer().seller_id());
  CHECK(out.offer->namespace_() == offer().namespace_());
  CHECK(out.offer->external_id() == offer().external_id());
}

TEST_CASE("a changed offer asks the other stages, honouring field interests") {
  stage_registry reg;
  auto changer = std::make_shared<probe>();
  changer->result.offer = offer();
  changer->result.offer->set_title("red bike");
  auto wants_title = std::make_shared<probe>();
  wants_title->fields = {"title"};
  auto wants_price = std::make_shared<probe>();
  wants_price->fields = {"price"};
  auto fails = std::make_shared<probe>();
  fails->throws = true;
  auto timer = std::make_shared<probe>();
  timer->answer = decision::timer(stage_clock::time_point{std::chrono::microseconds{now + 500}});
  auto skip = std::make_shared<probe>();
  skip->answer = decision::skip();
  reg.add("changer", changer).add("title", wants_title).add("price", wants_price);
  reg.add("fails", fails).add("timer", timer).add("skip", skip);
  offer_context ctx;
  ctx.queued_now = {};
  auto out = after_process(reg, "changer", offer(), ctx, changer->result, now, {});
  REQUIRE(out.offer_changed);
  CHECK(out.offer->version() == 5);
  CHECK(out.offer->title() == "red bike");
  REQUIRE(out.ws.outbox);
  v1::OfferSaved saved;
  REQUIRE(saved.ParseFromString(*out.ws.outbox));
  CHECK(saved.offer().version() == 5);
  std::map<std::string, int64_t> enq;
  for (auto& e : out.ws.enqueue)
    enq[e.lane] = e.due_at_us;
  // title: interested; price: not; fails: should_process threw, enqueued anyway (seed);
  // timer: at its time; skip: no; changer: not asked about its own change.
  CHECK(enq
        == std::map<std::string, int64_t>{{"fails", now}, {"timer", now + 500}, {"title", now}});
  SUBCASE("a stage already queued is not asked again") {
    ctx.queued_now = {"title", "fails"};
    auto again = after_process(reg, "changer", offer(), ctx, changer->result, now, {});
    CHECK(again.ws.enqueue.size() == 1);
  }
}

TEST_CASE("a stage re-triggered too often in one chain is cut and dead-lettered") {
  stage_registry reg;
  auto a = std::make_shared<probe>();
  a->result.offer = offer();
  a->result.offer->set_title("x");
  reg.add("a", a).add("b", std::make_shared<probe>());
  offer_context ctx;
  ctx.chain["b"] = 3;
  auto out = after_process(reg, "a", offer(), ctx, a->result, now, runner_limits{3});
  CHECK(out.storms_cut == 1);
  CHECK(out.ws.enqueue.empty());
  REQUIRE(out.ws.dead_letters.size() == 1);
  CHECK(out.ws.dead_letters.front().stage_id == "b");
  CHECK(out.ws.dead_letters.front().reason.find("change storm") != std::string::npos);
}

TEST_CASE("an external change asks every stage not queued; a new offer asks all") {
  stage_registry reg;
  auto t = std::make_shared<probe>();
  t->fields = {"title"};
  reg.add("t", t).add("any", std::make_shared<probe>());
  offer_context ctx;
  auto fresh = ask_stages(reg, nullptr, offer(), ctx, {}, now, persistence::priority::normal);
  CHECK(fresh.size() == 2);
  auto a0 = offer();
  auto b = offer();
  b.set_description("longer");
  auto changed = ask_stages(reg, &a0, b, ctx, {}, now, persistence::priority::normal);
  REQUIRE(changed.size() == 1);
  CHECK(changed.front().lane == "any");
  CHECK(ask_stages(reg, &b, b, ctx, {}, now, persistence::priority::normal).empty());
}
