#pragma once
// What a client may put into an offer: checked at every edge (gRPC, feed exchange) before
// anything reaches an actor.

#include <string>

#include "gost/v1/offer.pb.h"

namespace gost {

constexpr size_t max_id_len = 256;
constexpr size_t max_text_len = 64 * 1024;

/// Checks what a client may set. Returns the first problem, naming the field.
inline std::string check_content(const v1::Offer& o) {
  if (o.seller_id().empty())
    return "offer.seller_id is required";
  if (o.seller_id().size() > max_id_len)
    return "offer.seller_id is longer than 256 bytes";
  if (o.namespace_().size() > max_id_len)
    return "offer.namespace is longer than 256 bytes";
  if (o.external_id().size() > max_id_len)
    return "offer.external_id is longer than 256 bytes";
  if (o.title().size() > max_text_len || o.description().size() > max_text_len)
    return "offer.title and offer.description must be at most 64 KiB each";
  if (o.has_price() && o.price().amount_minor() < 0)
    return "offer.price.amount_minor must not be negative";
  if (o.has_price() && !o.price().currency().empty() && o.price().currency().size() != 3)
    return "offer.price.currency must be a three-letter ISO 4217 code like RUB";
  return {};
}

} // namespace gost
