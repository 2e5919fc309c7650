// The recent-events ring, an actor's trail and the trace hub (issue 13): plain classes.
#include <doctest/doctest.h>

#include <thread>

#include "gost/core/kit/trail.hpp"

using namespace gost::kit;
using namespace std::chrono_literals;

namespace {

recent_event at(int64_t t) {
  recent_event e;
  e.at_us = t;
  return e;
}

std::vector<int64_t> times(const recent_ring& r) {
  std::vector<int64_t> out;
  r.for_each([&](const recent_event& e) { out.push_back(e.at_us); });
  return out;
}

} // namespace

TEST_CASE("recent_ring grows 1, 2, 4 up to its capacity, then keeps the last N oldest first") {
  recent_ring r{5};
  CHECK(r.allocated() == 0);
  r.push(at(1));
  CHECK(r.allocated() == 1);
  r.push(at(2));
  CHECK(r.allocated() == 2);
  r.push(at(3));
  CHECK(r.allocated() == 4);
  CHECK(times(r) == std::vector<int64_t>{1, 2, 3});
  r.push(at(4));
  r.push(at(5));
  CHECK(r.allocated() == 5);
  CHECK(times(r) == std::vector<int64_t>{1, 2, 3, 4, 5});
  for (int64_t t = 6; t <= 12; ++t)
    r.push(at(t));
  CHECK(r.allocated() == 5); // no allocation once full
  CHECK(r.size() == 5);
  CHECK(times(r) == std::vector<int64_t>{8, 9, 10, 11, 12});
  CHECK(sizeof(recent_event) <= 32);
}

TEST_CASE("a ring of capacity 0 keeps nothing and allocates nothing") {
  recent_ring r{0};
  r.push(at(1));
  CHECK(r.size() == 0);
  CHECK(r.allocated() == 0);
}

TEST_CASE("actor_trail: an event in progress, what it waits on, then recorded with its result") {
  actor_trail t{4};
  static const std::string audit = "audit";
  t.begin(event_kind::run, event_source::timer, &audit, 1'000);
  t.wait(waiting_on::writer, 1'500);
  activity a;
  t.snapshot(a, 2'000);
  CHECK(a.in_event);
  CHECK(a.current.kind == event_kind::run);
  CHECK(a.current.result == event_result::running);
  CHECK(a.current.lane == "audit");
  CHECK(a.current.duration_us == 1'000);
  CHECK(a.waiting == waiting_on::writer);
  CHECK(a.waiting_us == 500);
  CHECK(a.recent.empty());
  recent_event done;
  REQUIRE(t.end(event_result::ok, 7, 2'500, done));
  CHECK(done.duration_us == 1'500);
  CHECK(done.version == 7);
  t.snapshot(a, 3'000);
  CHECK_FALSE(a.in_event);
  CHECK(a.waiting == waiting_on::nothing);
  REQUIRE(a.recent.size() == 1);
  CHECK(a.recent[0].source == event_source::timer);
  CHECK(a.recent[0].result == event_result::ok);
  CHECK(a.recent[0].lane == "audit");
  CHECK_FALSE(t.end(event_result::ok, 7, 3'000, done)); // nothing in progress
}

TEST_CASE("names round-trip") {
  for (auto k : {event_kind::create, event_kind::remove, event_kind::run})
    CHECK(kind_of(to_string(k)) == k);
  for (auto s : {event_source::api, event_source::feed, event_source::console, event_source::queue})
    CHECK(source_of(to_string(s)) == s);
  for (auto r : {event_result::ok, event_result::fenced, event_result::running})
    CHECK(result_of(to_string(r)) == r);
  CHECK(waiting_of("writer") == waiting_on::writer);
  CHECK(std::string{to_string(event_kind::remove)} == "delete");
}

TEST_CASE("trace_hub: nothing subscribed costs a load; subscribers get their entity's or lane's "
          "events; a full queue drops and counts; unsubscribed on destruction") {
  auto hub = std::make_shared<trace_hub>();
  CHECK_FALSE(hub->any());
  static const std::string audit = "audit", expire = "expire";
  auto by_id = hub->subscribe("o1", "", 2);
  auto by_lane = hub->subscribe("", "audit");
  CHECK(hub->any());
  CHECK(hub->subscriptions() == 2);
  auto e = at(10);
  e.lane = &audit;
  hub->publish("o1", 3, e);
  e.lane = &expire;
  hub->publish("o2", 4, e); // neither: another offer, another lane
  e.lane = &audit;
  hub->publish("o2", 4, e);
  trace_event got;
  REQUIRE(by_id->next(got, 0ms));
  CHECK(got.entity_id == "o1");
  CHECK(got.shard == 3);
  CHECK_FALSE(by_id->next(got, 0ms));
  REQUIRE(by_lane->next(got, 0ms));
  CHECK(got.entity_id == "o1");
  REQUIRE(by_lane->next(got, 0ms));
  CHECK(got.entity_id == "o2");
  CHECK(got.e.lane == "audit");
  CHECK_FALSE(by_lane->next(got, 0ms));
  for (int i = 0; i < 5; ++i)
    hub->publish("o1", 3, e);
  CHECK(by_id->dropped() == 3);
  by_id.reset();
  CHECK(hub->subscriptions() == 1);
  by_lane.reset();
  CHECK_FALSE(hub->any());
}

TEST_CASE("trace_subscription::next wakes when an event is published from another thread") {
  auto hub = std::make_shared<trace_hub>();
  auto sub = hub->subscribe("o1", "");
  std::thread t{[&] { hub->publish("o1", 0, at(1)); }};
  trace_event got;
  CHECK(sub->next(got, 10s));
  t.join();
}
