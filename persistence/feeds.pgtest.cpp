// The feed exchange's bookkeeping on a real PostgreSQL: duplicates within a load, re-delivered
// batches, the offers a load did not carry, running counts and finishing.
#include <doctest/doctest.h>

#include <algorithm>

#include "gost/persistence/feeds/feeds.hpp"
#include "gost/persistence/offers/offer_store.hpp"
#include "gost/testing/two_groups.hpp"
#include "gost/v1/offer.pb.h"
#include "pg_fixture.hpp"

using namespace gost::persistence;

namespace {

gost::v1::Offer offer(const std::string& id, const std::string& ns, const std::string& ext) {
  gost::v1::Offer o;
  o.set_id(id);
  o.set_seller_id("seller");
  o.set_namespace_(ns);
  o.set_external_id(ext);
  o.set_version(1);
  return o;
}

} // namespace

TEST_CASE("a load's external ids: fresh, re-delivered, duplicate") {
  migrated_db m;
  auto task = begin_feed_task(m.pool, "t1", "seller", "shop");
  REQUIRE(task);
  CHECK_FALSE(task->finished);
  auto first = record_feed_items(m.pool, "t1", "b1", {"a", "b", "a"});
  REQUIRE(first);
  CHECK(*first == std::vector<feed_item>{feed_item::fresh, feed_item::fresh, feed_item::duplicate});
  // The same batch again (re-delivered): known from it, not duplicates.
  auto again = record_feed_items(m.pool, "t1", "b1", {"a", "b"});
  REQUIRE(again);
  CHECK(*again == std::vector<feed_item>{feed_item::again, feed_item::again});
  // Another batch carrying "b" again: a duplicate; "c" is new.
  auto second = record_feed_items(m.pool, "t1", "b2", {"b", "c"});
  REQUIRE(second);
  CHECK(*second == std::vector<feed_item>{feed_item::duplicate, feed_item::fresh});
  // Another task knows nothing of these.
  REQUIRE(begin_feed_task(m.pool, "t2", "seller", "shop"));
  auto other = record_feed_items(m.pool, "t2", "x", {"a"});
  REQUIRE(other);
  CHECK(other->front() == feed_item::fresh);

  REQUIRE_FALSE(add_feed_counts(m.pool, "t1", feed_counts{2, 1, 0, 1, 3}));
  REQUIRE_FALSE(add_feed_counts(m.pool, "t1", feed_counts{1, 0, 4, 0, 0}));
  auto progress = feed_progress(m.pool, "t1");
  REQUIRE(progress);
  CHECK(progress->first.added == 3);
  CHECK(progress->first.unchanged == 4);
  CHECK(progress->first.duplicates == 3);
  CHECK(progress->second == 2); // batches b1 and b2

  REQUIRE_FALSE(finish_feed_task(m.pool, "t1", "summary-bytes"));
  auto done = begin_feed_task(m.pool, "t1", "seller", "shop");
  REQUIRE(done);
  CHECK(done->finished);
  CHECK(done->summary == "summary-bytes");
  CHECK(m.db.scalar("SELECT count(*) FROM feed_items WHERE task_id = 't1'") == "0");
}

TEST_CASE("the seller's offers a load did not carry, and lookups by external id") {
  migrated_db m;
  offer_store store{m.pool};
  REQUIRE_FALSE(store.insert(offer("o1", "shop", "a"), 0));
  REQUIRE_FALSE(store.insert(offer("o2", "shop", "b"), 0));
  REQUIRE_FALSE(store.insert(offer("o3", "shop", "c"), 0));
  REQUIRE_FALSE(store.insert(offer("o4", "other", "d"), 0)); // another namespace
  REQUIRE_FALSE(store.insert(offer("o5", "shop", ""), 0));   // no external id
  REQUIRE(begin_feed_task(m.pool, "t", "seller", "shop"));
  REQUIRE(record_feed_items(m.pool, "t", "b1", {"a", "c", "zzz"}));
  auto missing = offers_missing_from(m.pool, "t", "seller", "shop");
  REQUIRE(missing);
  REQUIRE(missing->size() == 1);
  CHECK(missing->front().offer_id == "o2");
  CHECK(missing->front().external_id == "b");
  gost::v1::Offer body;
  REQUIRE(body.ParseFromString(missing->front().body));
  CHECK(body.id() == "o2");
  auto found = find_by_external_ids(m.pool, "seller", "shop", {"a", "d", "nope"});
  REQUIRE(found);
  REQUIRE(found->size() == 1);
  CHECK(found->front().offer_id == "o1");
  CHECK(found->front().version == 1);
}

TEST_CASE("with the groups' databases, the feed readers find the seller's offers a split left "
          "in another group's (claimed keys, spread groups); without them, home only") {
  migrated_db home;
  migrated_db far; // group 1: shards 8-15
  gost::testing::two_groups where{home.pool, far.pool, 16, 8};
  offer_store at_home{home.pool};
  offer_store at_far{far.pool};
  REQUIRE_FALSE(at_home.insert(offer("o1", "shop", "a"), 0));
  REQUIRE_FALSE(at_far.insert(offer("s1", "shop", "b"), 9)); // strays of the seller
  REQUIRE_FALSE(at_far.insert(offer("s2", "shop", "c"), 9));
  REQUIRE_FALSE(at_far.insert(offer("s3", "other", "x"), 9)); // another namespace
  // Their keys claimed at home, and the seller spread to shard 9 (group 1's), as a split's
  // fence leaves them; a claim whose offer is gone finds nothing.
  home.db.scalar("INSERT INTO offer_keys (seller_id, namespace, external_id, offer_id) VALUES"
                 " ('seller', 'shop', 'b', 's1'), ('seller', 'shop', 'c', 's2'),"
                 " ('seller', 'other', 'x', 's3'), ('seller', 'shop', 'gone', 's9')");
  home.db.scalar("INSERT INTO seller_spread (seller_id, stray_shard) VALUES ('seller', 9)");
  auto ids = [](const std::vector<keyed_offer>& xs) {
    std::vector<std::string> out;
    for (auto& x : xs)
      out.push_back(x.offer_id + ":" + x.external_id);
    std::sort(out.begin(), out.end());
    std::string joined;
    for (auto& x : out)
      joined += (joined.empty() ? "" : ",") + x;
    return joined;
  };
  auto found =
    find_by_external_ids(home.pool, "seller", "shop", {"a", "b", "gone", "nope"}, &where);
  REQUIRE(found);
  CHECK(ids(*found) == "o1:a,s1:b");
  gost::v1::Offer body;
  for (auto& f : *found)
    if (f.offer_id == "s1") {
      REQUIRE(body.ParseFromString(f.body));
      CHECK(body.id() == "s1");
      CHECK(f.version == 1);
    }
  found = find_by_external_ids(home.pool, "seller", "shop", {"a", "b"});
  REQUIRE(found);
  CHECK(ids(*found) == "o1:a");

  REQUIRE(begin_feed_task(home.pool, "t", "seller", "shop"));
  REQUIRE(record_feed_items(home.pool, "t", "b1", {"a", "c"}));
  auto missing = offers_missing_from(home.pool, "t", "seller", "shop", &where);
  REQUIRE(missing);
  CHECK(ids(*missing) == "s1:b");
  missing = offers_missing_from(home.pool, "t", "seller", "shop");
  REQUIRE(missing);
  CHECK(missing->empty());
  // A seller without spread rows reads home only, whatever `where` says.
  home.db.scalar("DELETE FROM seller_spread");
  found = find_by_external_ids(home.pool, "seller", "shop", {"a", "b"}, &where);
  REQUIRE(found);
  CHECK(ids(*found) == "o1:a");
}

TEST_CASE("a batch's counts go in with its record, once, however often it is handled") {
  migrated_db m;
  REQUIRE(begin_feed_task(m.pool, "t1", "seller", "shop"));
  int calls = 0;
  auto count = [&](const std::vector<feed_item>& items) {
    ++calls;
    feed_counts n;
    for (auto i : items)
      (i == feed_item::duplicate ? n.duplicates : n.added) += 1;
    return n;
  };
  auto first = record_feed_batch(m.pool, "t1", "b1", {"a", "b", "a"}, count);
  REQUIRE(first);
  CHECK(first->first_time);
  CHECK(first->items
        == std::vector<feed_item>{feed_item::fresh, feed_item::fresh, feed_item::duplicate});
  // Handled again (a crash before the consumer committed its offset, or a re-delivery): the
  // items are known from this batch, and nothing is counted a second time.
  auto again = record_feed_batch(m.pool, "t1", "b1", {"a", "b", "a"}, count);
  REQUIRE(again);
  CHECK_FALSE(again->first_time);
  CHECK(again->items
        == std::vector<feed_item>{feed_item::again, feed_item::again, feed_item::duplicate});
  CHECK(calls == 1);
  // A correction after applying (one intended add turned out a rejection) adds a delta.
  REQUIRE_FALSE(add_feed_counts(m.pool, "t1", feed_counts{-1, 0, 0, 1, 0}));
  auto progress = feed_progress(m.pool, "t1");
  REQUIRE(progress);
  CHECK(progress->first.added == 1);
  CHECK(progress->first.rejected == 1);
  CHECK(progress->first.duplicates == 1);
  // A batch that fails to record (here: an unknown task) counts nothing.
  CHECK_FALSE(record_feed_batch(m.pool, "no-such-task", "b1", {"z"}, count));
  CHECK(calls == 1);
  REQUIRE_FALSE(finish_feed_task(m.pool, "t1", "summary"));
  CHECK(m.db.scalar("SELECT count(*) FROM feed_batches WHERE task_id = 't1'") == "0");
}
