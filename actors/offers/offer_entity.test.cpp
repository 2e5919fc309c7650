#include <doctest/doctest.h>

#include "gost/offers/offer_entity.hpp"
#include "gost/offers/protocol.hpp"
#include "gost/persistence/errors.hpp"

using gost::errc;
using gost::offer_entity;

namespace {

gost::v1::Offer sample() {
  gost::v1::Offer o;
  o.set_id("o1");
  o.set_seller_id("s1");
  o.set_title("bike");
  return o;
}

const auto t0 = std::chrono::system_clock::time_point{std::chrono::seconds{1'700'000'000}};
const auto t1 = t0 + std::chrono::seconds{5};
const gost::offer_limits limits; // the defaults (content_rules.test.cpp checks each limit)

} // namespace

TEST_CASE("create sets the entity's id, version 1, timestamps and a default source") {
  offer_entity e{"o9"};
  e.committed(std::nullopt);
  auto o = e.prepare_create(sample(), t0, limits); // the content says o1: the entity's id wins
  REQUIRE(o);
  CHECK(o->id() == "o9");
  CHECK(o->version() == 1);
  CHECK(o->created_at().seconds() == 1'700'000'000);
  CHECK(o->updated_at().seconds() == 1'700'000'000);
  CHECK(o->source() == gost::v1::OFFER_SOURCE_MANUAL);
}

TEST_CASE("create of an existing offer is already_exists") {
  offer_entity e;
  e.committed(sample());
  auto o = e.prepare_create(sample(), t0, limits);
  REQUIRE_FALSE(o);
  CHECK(o.error() == errc::already_exists);
}

TEST_CASE("update bumps the version and keeps created_at") {
  offer_entity e;
  e.committed(*offer_entity{"o1"}.prepare_create(sample(), t0, limits));
  auto in = sample();
  in.set_title("red bike");
  auto o = e.prepare_update(in, 1, t1, limits);
  REQUIRE(o);
  CHECK(o->version() == 2);
  CHECK(o->title() == "red bike");
  CHECK(o->created_at().seconds() == t0.time_since_epoch() / std::chrono::seconds{1});
  CHECK(o->updated_at().seconds() == t1.time_since_epoch() / std::chrono::seconds{1});
  SUBCASE("a stale expected version is a conflict naming the current one") {
    e.committed(*o);
    auto stale = e.prepare_update(in, 1, t1, limits);
    REQUIRE_FALSE(stale);
    CHECK(stale.error() == errc::conflict);
    CHECK(gost::persistence::error_message(stale.error()).find("version 2") != std::string::npos);
  }
  SUBCASE("any_version skips the check") {
    e.committed(*o);
    auto any = e.prepare_update(in, gost::any_version, t1, limits);
    REQUIRE(any);
    CHECK(any->version() == 3);
  }
}

TEST_CASE("update and delete of a missing offer are not_found") {
  offer_entity e{"o1"};
  e.committed(std::nullopt);
  CHECK(e.id() == "o1"); // kept while the offer does not exist
  auto u = e.prepare_update(sample(), gost::any_version, t0, limits);
  REQUIRE_FALSE(u);
  CHECK(u.error() == errc::not_found);
  auto d = e.prepare_delete(gost::any_version);
  REQUIRE_FALSE(d);
  CHECK(d.error() == errc::not_found);
  CHECK(gost::persistence::error_message(d.error()).find("o1") != std::string::npos);
}

TEST_CASE("a masked update takes only the listed fields and keeps the rest") {
  offer_entity e;
  auto stored = sample();
  stored.set_version(3);
  stored.set_description("kept");
  (*stored.mutable_attributes())["color"] = "red";
  stored.mutable_price()->set_amount_minor(100);
  e.committed(stored);
  gost::v1::Offer in;
  in.set_id("o1");
  in.set_title("new title");
  in.set_description("ignored: not in the mask");
  (*in.mutable_attributes())["size"] = "L";
  auto o = e.prepare_update(in, gost::any_version, t1, limits, "title,attributes,price");
  REQUIRE(o);
  CHECK(o->version() == 4);
  CHECK(o->title() == "new title");
  CHECK(o->description() == "kept");
  CHECK(o->seller_id() == "s1");
  // Listed map and message fields are replaced, not merged; a listed field absent is cleared.
  CHECK(o->attributes().size() == 1);
  CHECK(o->attributes().at("size") == "L");
  CHECK_FALSE(o->has_price());
}

TEST_CASE("the limits hold for the offer as it will be stored: a masked update is checked merged") {
  gost::offer_limits small;
  small.photos_max = 2;
  small.offer_max_bytes = 300;
  offer_entity e;
  auto stored = sample();
  stored.set_version(1);
  stored.set_description(std::string(200, 'd'));
  e.committed(stored);
  gost::v1::Offer in;
  in.set_id("o1");
  in.add_photos()->set_url("a");
  in.add_photos()->set_url("b");
  REQUIRE(e.prepare_update(in, gost::any_version, t1, small, "photos"));
  in.add_photos()->set_url("c");
  auto three = e.prepare_update(in, gost::any_version, t1, small, "photos");
  REQUIRE_FALSE(three);
  CHECK(three.error() == errc::invalid_argument);
  CHECK(gost::persistence::error_message(three.error()).find("limits.photos_max")
        != std::string::npos);
  // The request alone is small; merged with the stored description it is over the size.
  gost::v1::Offer title_only;
  title_only.set_id("o1");
  title_only.set_title(std::string(120, 't'));
  REQUIRE(gost::content_bytes(title_only) < small.offer_max_bytes);
  auto merged = e.prepare_update(title_only, gost::any_version, t1, small, "title");
  REQUIRE_FALSE(merged);
  CHECK(gost::persistence::error_message(merged.error()).find("limits.offer_max_bytes")
        != std::string::npos);
  // A create is checked with the limits it is given.
  offer_entity fresh{"o2"};
  fresh.committed(std::nullopt);
  auto big = sample();
  big.set_description(std::string(400, 'd'));
  CHECK_FALSE(fresh.prepare_create(big, t0, small));
  CHECK(fresh.prepare_create(big, t0, limits));
}
