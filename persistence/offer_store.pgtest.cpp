#include <doctest/doctest.h>

#include "gost/persistence/offers/offer_store.hpp"
#include "gost/persistence/pg_pool.hpp"
#include "gost/persistence/schema.hpp"
#include "gost/testing/pg.hpp"
#include "gost/v1/offer.pb.h"
#include "pg_fixture.hpp"

using namespace gost::persistence;

namespace {

struct fixture : migrated_db {
  offer_store store{pool};
};

gost::v1::Offer offer(const std::string& id, const std::string& ext = "") {
  gost::v1::Offer o;
  o.set_id(id);
  o.set_seller_id("seller");
  o.set_namespace_("ns");
  o.set_external_id(ext);
  o.set_title("title of " + id);
  (*o.mutable_attributes())["color"] = "red";
  o.set_version(1);
  return o;
}

} // namespace

TEST_CASE_FIXTURE(fixture, "insert and load round-trip the whole offer") {
  auto o = offer("a", "ext-a");
  REQUIRE_FALSE(store.insert(o, 7));
  auto r = store.load("a");
  REQUIRE(r);
  REQUIRE(*r);
  CHECK((*r)->SerializeAsString() == o.SerializeAsString());
  CHECK(db.scalar("SELECT shard FROM offers WHERE offer_id = 'a'") == "7");
  auto missing = store.load("nope");
  REQUIRE(missing);
  CHECK_FALSE(*missing);
}

TEST_CASE_FIXTURE(fixture, "the seller's key is unique and findable") {
  REQUIRE_FALSE(store.insert(offer("a", "ext"), 1));
  auto dup = store.insert(offer("b", "ext"), 2);
  CHECK(dup == db_errc::already_exists);
  // Offers without an external id never collide.
  CHECK_FALSE(store.insert(offer("c"), 1));
  CHECK_FALSE(store.insert(offer("d"), 1));
  auto id = store.find_id("seller", "ns", "ext");
  REQUIRE(id);
  REQUIRE(*id);
  CHECK(**id == "a");
  auto none = store.find_id("seller", "other-ns", "ext");
  REQUIRE(none);
  CHECK_FALSE(*none);
  // A key claimed for an offer a split left in another group's database (migration 0031) is
  // found as its claim says.
  db.scalar("INSERT INTO offer_keys (seller_id, namespace, external_id, offer_id)"
            " VALUES ('seller', 'ns', 'far', 'stray-1')");
  auto claimed = store.find_id("seller", "ns", "far");
  REQUIRE(claimed);
  REQUIRE(*claimed);
  CHECK(**claimed == "stray-1");
}

TEST_CASE_FIXTURE(fixture, "update is a compare-and-set on version") {
  REQUIRE_FALSE(store.insert(offer("a"), 1));
  auto v2 = offer("a");
  v2.set_title("new");
  v2.set_version(2);
  CHECK_FALSE(store.update(v2, 1));
  CHECK(store.update(v2, 1) == db_errc::conflict); // the row is at 2 now
  auto gone = offer("zzz");
  gone.set_version(2);
  CHECK(store.update(gone, 1) == db_errc::not_found);
  auto r = store.load("a");
  REQUIRE(r);
  CHECK((*r)->title() == "new");
  CHECK((*r)->version() == 2);
  CHECK(store.remove("a", 1) == db_errc::conflict);
  CHECK_FALSE(store.remove("a", 2));
  CHECK(store.remove("a", 2) == db_errc::not_found);
}
