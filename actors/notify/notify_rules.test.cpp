// The rules of `notify.on_change`: the transition table, the notification of an after-save
// event (none for deletes and versions that made no notified transition), its key and its
// JSON, the same for a re-delivered event.
#include <doctest/doctest.h>

#include <google/protobuf/util/time_util.h>

#include "gost/notify/notify_rules.hpp"

using namespace gost;
using namespace gost::notify;

namespace {

v1::OfferSaved event(v1::OfferStatus before, v1::OfferStatus after, int64_t version = 3) {
  v1::OfferSaved e;
  auto* o = e.mutable_offer();
  o->set_id("o-1");
  o->set_version(version);
  o->set_status(after);
  o->set_seller_id("s-1");
  o->set_namespace_("ns");
  o->set_external_id("x-1");
  o->set_title("bike");
  *o->mutable_updated_at() = google::protobuf::util::TimeUtil::MillisecondsToTimestamp(1234567);
  e.set_previous_status(before);
  e.set_changed_by("expire");
  return e;
}

} // namespace

TEST_CASE("the transition table") {
  using S = v1::OfferStatus;
  const S all[] = {v1::OFFER_STATUS_UNSPECIFIED, v1::OFFER_STATUS_DRAFT,  v1::OFFER_STATUS_ACTIVE,
                   v1::OFFER_STATUS_INACTIVE,    v1::OFFER_STATUS_BANNED, v1::OFFER_STATUS_DELETED};
  for (auto before : all)
    for (auto after : all) {
      CAPTURE(before);
      CAPTURE(after);
      auto k = transition(before, after);
      if (before == after)
        CHECK(k == v1::NOTIFICATION_KIND_UNSPECIFIED);
      else if (after == v1::OFFER_STATUS_ACTIVE)
        CHECK(k == v1::NOTIFICATION_KIND_PUBLISHED); // created active, from draft, re-published
      else if (after == v1::OFFER_STATUS_BANNED)
        CHECK(k == v1::NOTIFICATION_KIND_REJECTED);
      else if (before == v1::OFFER_STATUS_ACTIVE && after == v1::OFFER_STATUS_INACTIVE)
        CHECK(k == v1::NOTIFICATION_KIND_EXPIRED);
      else
        CHECK(k == v1::NOTIFICATION_KIND_UNSPECIFIED);
    }
  // Spelled out, the ones that matter.
  CHECK(transition(v1::OFFER_STATUS_DRAFT, v1::OFFER_STATUS_INACTIVE)
        == v1::NOTIFICATION_KIND_UNSPECIFIED); // never published: nothing expired
  CHECK(transition(v1::OFFER_STATUS_BANNED, v1::OFFER_STATUS_INACTIVE)
        == v1::NOTIFICATION_KIND_UNSPECIFIED);
  CHECK(std::string{kind_name(v1::NOTIFICATION_KIND_EXPIRED)} == "expired");
}

TEST_CASE("an event that expired the offer makes a notification keyed offer:version") {
  auto n = notification_of(event(v1::OFFER_STATUS_ACTIVE, v1::OFFER_STATUS_INACTIVE, 7));
  REQUIRE(n);
  CHECK(n->key() == "o-1:7");
  CHECK(n->key() == key_of("o-1", 7));
  CHECK(n->kind() == v1::NOTIFICATION_KIND_EXPIRED);
  CHECK(n->offer_id() == "o-1");
  CHECK(n->version() == 7);
  CHECK(n->status() == v1::OFFER_STATUS_INACTIVE);
  CHECK(n->previous_status() == v1::OFFER_STATUS_ACTIVE);
  CHECK(n->changed_by() == "expire");
  CHECK(n->seller_id() == "s-1");
  CHECK(n->namespace_() == "ns");
  CHECK(n->external_id() == "x-1");
  CHECK(n->title() == "bike");
  CHECK(n->updated_at_ms() == 1234567);
}

TEST_CASE("no notification for a delete, a kept status or an unnotified transition") {
  auto deleted = event(v1::OFFER_STATUS_ACTIVE, v1::OFFER_STATUS_ACTIVE);
  deleted.set_deleted(true);
  CHECK_FALSE(notification_of(deleted));
  auto banned_then_deleted = event(v1::OFFER_STATUS_ACTIVE, v1::OFFER_STATUS_BANNED);
  banned_then_deleted.set_deleted(true);
  CHECK_FALSE(notification_of(banned_then_deleted));
  // A change of content or of states only keeps the status.
  CHECK_FALSE(notification_of(event(v1::OFFER_STATUS_ACTIVE, v1::OFFER_STATUS_ACTIVE)));
  CHECK_FALSE(notification_of(event(v1::OFFER_STATUS_UNSPECIFIED, v1::OFFER_STATUS_DRAFT)));
  CHECK(notification_of(event(v1::OFFER_STATUS_UNSPECIFIED, v1::OFFER_STATUS_ACTIVE))->kind()
        == v1::NOTIFICATION_KIND_PUBLISHED);
  CHECK(notification_of(event(v1::OFFER_STATUS_DRAFT, v1::OFFER_STATUS_BANNED))->kind()
        == v1::NOTIFICATION_KIND_REJECTED);
}

TEST_CASE("a re-delivered event gives the same key, bytes and JSON") {
  auto e = event(v1::OFFER_STATUS_DRAFT, v1::OFFER_STATUS_ACTIVE, 2);
  v1::OfferSaved again;
  REQUIRE(again.ParseFromString(e.SerializeAsString()));
  auto a = notification_of(e);
  auto b = notification_of(again);
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->SerializeAsString() == b->SerializeAsString());
  CHECK(to_json(*a) == to_json(*b));
  auto json = to_json(*a);
  CHECK(json.find("\"key\":\"o-1:2\"") != std::string::npos);
  CHECK(json.find("\"kind\":\"NOTIFICATION_KIND_PUBLISHED\"") != std::string::npos);
  CHECK(json.find("\"previous_status\":\"OFFER_STATUS_DRAFT\"") != std::string::npos);
  CHECK(json.find("\"offer_id\":\"o-1\"") != std::string::npos);
  auto h = webhook_headers(*a);
  REQUIRE(h.size() == 2);
  CHECK(h[1] == std::make_pair(std::string{"Idempotency-Key"}, std::string{"o-1:2"}));
}
