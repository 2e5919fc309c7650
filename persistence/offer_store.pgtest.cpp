#include <doctest/doctest.h>

#include <algorithm>

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

TEST_CASE_FIXTURE(fixture, "a seller's page is in id byte order, after a position, by namespace; "
                           "it names the shards a split left offers of the seller on") {
  for (auto id : {"b", "a", "B", "c\xc3\xa9", "c"}) {
    auto o = offer(id, std::string{"e-"} + id);
    if (std::string{id} == "c")
      o.set_namespace_("other");
    REQUIRE_FALSE(store.insert(o, 1));
  }
  auto ids = [](const seller_page& p) {
    std::string out;
    for (auto& o : p.offers)
      out += (out.empty() ? "" : ",") + o.id();
    return out;
  };
  auto page = store.list_by_seller("seller", std::nullopt, "", 3);
  REQUIRE(page);
  CHECK(ids(*page) == "B,a,b"); // bytes: 'B' < 'a'
  CHECK(page->spread.empty());
  CHECK(page->offers[0].version() == 1);
  page = store.list_by_seller("seller", std::nullopt, "b", 3);
  REQUIRE(page);
  CHECK(ids(*page) == "c,c\xc3\xa9");
  page = store.list_by_seller("seller", std::string{"ns"}, "a", 10);
  REQUIRE(page);
  CHECK(ids(*page) == "b,c\xc3\xa9");
  // Spread rows (shards a split left offers of the seller on, ADR 0023) come with any page of
  // the seller, even an empty one.
  db.scalar("INSERT INTO seller_spread (seller_id, stray_shard) VALUES ('seller', 3),"
            " ('seller', 1), ('other', 2)");
  page = store.list_by_seller("seller", std::nullopt, "z", 3);
  REQUIRE(page);
  CHECK(page->offers.empty());
  std::sort(page->spread.begin(), page->spread.end());
  CHECK(page->spread == std::vector<uint32_t>{1, 3});
  page = store.list_by_seller("seller", std::nullopt, "", 2);
  REQUIRE(page);
  CHECK(ids(*page) == "B,a");
  CHECK(page->spread.size() == 2);
}

TEST_CASE("merge_pages: the first `limit` of the pages in id byte order, each offer once") {
  auto page = [](std::vector<std::pair<std::string, int64_t>> xs) {
    std::vector<gost::v1::Offer> out;
    for (auto& [id, v] : xs) {
      gost::v1::Offer o;
      o.set_id(id);
      o.set_version(v);
      out.push_back(o);
    }
    return out;
  };
  auto merged = merge_pages(
    {page({{"a", 1}, {"d", 1}, {"x", 1}}), page({{"b", 2}, {"d", 2}}), page({}), page({{"C", 3}})},
    4);
  std::string out;
  for (auto& o : merged)
    out += o.id() + ":" + std::to_string(o.version()) + " ";
  CHECK(out == "C:3 a:1 b:2 d:1 "); // d once, the first page's copy
  CHECK(merge_pages({page({{"a", 1}})}, 0).empty());
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
