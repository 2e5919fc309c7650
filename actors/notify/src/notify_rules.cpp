#include "gost/notify/notify_rules.hpp"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>

namespace gost::notify {

v1::NotificationKind transition(v1::OfferStatus before, v1::OfferStatus after) {
  if (before == after)
    return v1::NOTIFICATION_KIND_UNSPECIFIED;
  if (after == v1::OFFER_STATUS_ACTIVE)
    return v1::NOTIFICATION_KIND_PUBLISHED;
  if (before == v1::OFFER_STATUS_ACTIVE && after == v1::OFFER_STATUS_INACTIVE)
    return v1::NOTIFICATION_KIND_EXPIRED;
  if (after == v1::OFFER_STATUS_BANNED)
    return v1::NOTIFICATION_KIND_REJECTED;
  return v1::NOTIFICATION_KIND_UNSPECIFIED;
}

const char* kind_name(v1::NotificationKind k) {
  switch (k) {
    case v1::NOTIFICATION_KIND_PUBLISHED: return "published";
    case v1::NOTIFICATION_KIND_EXPIRED: return "expired";
    case v1::NOTIFICATION_KIND_REJECTED: return "rejected";
    default: return "none";
  }
}

std::string key_of(const std::string& offer_id, int64_t version) {
  return offer_id + ":" + std::to_string(version);
}

std::optional<v1::OfferNotification> notification_of(const v1::OfferSaved& event) {
  if (event.deleted())
    return std::nullopt;
  auto& o = event.offer();
  auto kind = transition(event.previous_status(), o.status());
  if (kind == v1::NOTIFICATION_KIND_UNSPECIFIED)
    return std::nullopt;
  v1::OfferNotification n;
  n.set_key(key_of(o.id(), o.version()));
  n.set_kind(kind);
  n.set_offer_id(o.id());
  n.set_version(o.version());
  n.set_status(o.status());
  n.set_previous_status(event.previous_status());
  n.set_changed_by(event.changed_by());
  n.set_seller_id(o.seller_id());
  n.set_namespace_(o.namespace_());
  n.set_external_id(o.external_id());
  n.set_title(o.title());
  if (o.has_updated_at())
    n.set_updated_at_ms(google::protobuf::util::TimeUtil::TimestampToMilliseconds(o.updated_at()));
  return n;
}

std::string to_json(const v1::OfferNotification& n) {
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  std::string out;
  // Cannot fail for a message of a generated type.
  (void)google::protobuf::util::MessageToJsonString(n, &out, opts);
  return out;
}

std::vector<std::pair<std::string, std::string>> webhook_headers(const v1::OfferNotification& n) {
  return {{"Content-Type", "application/json"}, {"Idempotency-Key", n.key()}};
}

} // namespace gost::notify
