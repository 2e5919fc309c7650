#pragma once
// The rules of the `notify.on_change` stage (issue 25 item 4), plain and unit-tested: which
// transition a saved version of an offer made (published, expired, rejected, or none) and the
// notification it sends, keyed for the receiver's de-duplication. Everything here is a
// function of the after-save event alone, so a re-delivered event (at least once) gives the
// same key and the same content. docs/notifications.md has the table.

#include <optional>
#include <string>
#include <vector>

#include "gost/v1/events.pb.h"
#include "gost/v1/notify.pb.h"

namespace gost::notify {

/// The transition from `before` to `after`: PUBLISHED when the offer became active (from any
/// other status, UNSPECIFIED included: created active), EXPIRED for active -> inactive,
/// REJECTED when it became banned; UNSPECIFIED for anything else (no notification).
v1::NotificationKind transition(v1::OfferStatus before, v1::OfferStatus after);

/// "published", "expired", "rejected" ("none" for UNSPECIFIED): metric labels, logs.
const char* kind_name(v1::NotificationKind k);

/// "<offer_id>:<version>": the receiver's de-duplication key (header `Idempotency-Key`).
std::string key_of(const std::string& offer_id, int64_t version);

/// The notification a saved version makes, or nullopt: none for a delete, nor when the version
/// made no notified transition (a change of states only keeps the status: none).
std::optional<v1::OfferNotification> notification_of(const v1::OfferSaved& event);

/// The webhook's body: `n` as JSON with the proto field names (`offer_id`, `previous_status`,
/// ...), enums by name, fields at their default left out (proto3 JSON); the same message gives
/// the same bytes.
std::string to_json(const v1::OfferNotification& n);

/// The webhook's headers: Content-Type and `Idempotency-Key`.
std::vector<std::pair<std::string, std::string>> webhook_headers(const v1::OfferNotification& n);

} // namespace gost::notify
