// The photo count stage's rules, tested with gost's stage harness
// (gost/testing/stage_harness.hpp): the engine's own rules (which stages a change asks, what a
// run writes, what its change asks again), without a node or a database.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "gost/testing/stage_harness.hpp"
#include "photo_count.hpp"

namespace {

gost::v1::Offer offer_with(int photos, gost::v1::OfferStatus status) {
  gost::v1::Offer o;
  o.set_id("o-1");
  o.set_title("a bike");
  o.set_status(status);
  for (int i = 0; i < photos; ++i)
    o.add_photos()->set_url("https://img.example/" + std::to_string(i) + ".jpg");
  return o;
}

} // namespace

TEST_CASE("the photos are counted into the stage's state once they change") {
  gost::testing::stage_harness h;
  h.add("photo_count", std::make_shared<photos::photo_count>());
  h.change(offer_with(3, gost::v1::OFFER_STATUS_ACTIVE));
  auto s = h.state<photos::v1::PhotoCount>("photo_count");
  REQUIRE(s);
  CHECK(s->photos() == 3);
  CHECK(h.runs_of["photo_count"] == 1);
  CHECK_FALSE(h.due("photo_count")); // nothing left queued

  // A title change is not among its interests: not asked.
  auto retitled = h.offer();
  retitled.set_title("a red bike");
  h.change(retitled);
  CHECK(h.runs_of["photo_count"] == 1);

  // A fourth photo: asked and counted again.
  auto more = h.offer();
  more.add_photos()->set_url("https://img.example/3.jpg");
  h.change(more);
  CHECK(h.runs_of["photo_count"] == 2);
  CHECK(h.state<photos::v1::PhotoCount>("photo_count")->photos() == 4);
}

TEST_CASE("an active offer without photos goes back to draft, and its own change does not loop") {
  gost::testing::stage_harness h;
  h.add("photo_count", std::make_shared<photos::photo_count>());
  h.change(offer_with(0, gost::v1::OFFER_STATUS_ACTIVE));
  CHECK(h.offer().status() == gost::v1::OFFER_STATUS_DRAFT);
  CHECK(h.offer().version() == 2); // the client's create, then the stage's change
  CHECK(h.runs_of["photo_count"] == 1);
  CHECK(h.dead_letters.empty());
  CHECK(h.failures.empty());
}
