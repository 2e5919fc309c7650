// The watchlist's rules, tested with gost's handler harness (gost/testing/entity_harness.hpp):
// no node, no database; the harness keeps the state, the clock and the named timers as gost
// does.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "gost/testing/entity_harness.hpp"
#include "watchlist.hpp"

using namespace std::chrono_literals;
using harness = gost::testing::entity_harness<watchlist::watchlist>;

namespace {

watchlist::v1::WatchlistEvent add(const std::string& id) {
  watchlist::v1::WatchlistEvent e;
  e.mutable_add()->set_offer_id(id);
  return e;
}

watchlist::v1::WatchlistEvent drop(const std::string& id) {
  watchlist::v1::WatchlistEvent e;
  e.mutable_remove()->set_offer_id(id);
  return e;
}

} // namespace

TEST_CASE("an add answers the new size; the 101st is refused and changes nothing") {
  harness w{"buyer-1"};
  for (int i = 0; i < watchlist::watchlist::max_entries; ++i) {
    auto r = w.ask(add("offer-" + std::to_string(i)));
    REQUIRE(r.ok());
    CHECK(r.reply().size() == i + 1);
  }
  auto full = w.ask(add("offer-x"));
  CHECK(full.refused());
  CHECK(full.refusal == gost::errc::failed_precondition);
  CHECK(full.message == "the watchlist holds 100 offers already: remove one first");
  CHECK(w.state.entries_size() == 100);
  CHECK(w.version == 100);

  auto again = w.ask(add("offer-7")); // there already: answered, unchanged
  REQUIRE(again.ok());
  CHECK_FALSE(again.reply().changed());
  CHECK(again.reply().size() == 100);
}

TEST_CASE("every change replaces the sweep timer; removing the last entry cancels it") {
  harness w;
  REQUIRE(w.ask(add("a")).ok());
  REQUIRE(w.has_timer("sweep"));
  auto first_due = w.timers().at("sweep").due;
  w.advance(10h); // not due yet: nothing handled
  REQUIRE(w.ask(add("b")).ok());
  REQUIRE(w.timers().size() == 1);
  CHECK(w.timers().at("sweep").due == first_due + 10h); // moved, not a second timer
  REQUIRE(w.ask(drop("a")).ok());
  REQUIRE(w.ask(drop("b")).ok());
  CHECK_FALSE(w.has_timer("sweep"));
}

TEST_CASE("the sweep removes entries older than 30 days and sets itself again") {
  harness w;
  REQUIRE(w.ask(add("old")).ok());
  auto fired = w.advance(24h * 20); // swept after a day: nothing old yet, set again each day
  REQUIRE(fired.size() == 20);
  CHECK(fired.front().timer == "sweep");
  CHECK(w.state.entries_size() == 1);
  REQUIRE(w.ask(add("new")).ok());
  w.advance(24h * 11);
  REQUIRE(w.state.entries_size() == 1);
  CHECK(w.state.entries(0).offer_id() == "new");
  CHECK(w.state.swept() == 1);
  CHECK(w.has_timer("sweep"));
}

TEST_CASE("a bad event is refused as an invalid argument") {
  harness w;
  auto r = w.send(add(""));
  CHECK(r.refused());
  CHECK(r.refusal == gost::errc::invalid_argument);
  CHECK(w.version == 0);
}
