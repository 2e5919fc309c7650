#include "gost/offers/content_rules.hpp"

#include <google/protobuf/wire_format_lite.h>

namespace gost {

namespace {

using wire = google::protobuf::internal::WireFormatLite;

// The keys named in the messages are declared in config/src/node_config.cpp (actors/ cannot
// include config/); runtime/node/limits.test.cpp checks that each one named here exists.

/// A key as a client may recognise it in a message: quoted, cut after 40 characters.
std::string shown(const std::string& key) {
  size_t chars = 0;
  size_t end = 0;
  while (end < key.size() && chars < 40) {
    ++end;
    while (end < key.size() && (static_cast<unsigned char>(key[end]) & 0xC0) == 0x80)
      ++end; // a code point's continuation bytes
    ++chars;
  }
  return "\"" + key.substr(0, end) + (end < key.size() ? "...\"" : "\"");
}

/// The text's characters when they are over `limit`, else 0 (a text of at most `limit` bytes
/// has at most `limit` characters: nothing is counted).
size_t chars_over(const std::string& text, uint64_t limit) {
  if (text.size() <= limit)
    return 0;
  auto n = utf8_chars(text);
  return n > limit ? n : 0;
}

} // namespace

std::string over_limit(const std::string& what, uint64_t value, const char* unit, uint64_t limit,
                       const char* key) {
  return what + " " + std::to_string(value) + " " + unit + "; the limit is " + std::to_string(limit)
         + " (" + key + ")";
}

size_t utf8_chars(std::string_view text) noexcept {
  size_t n = 0;
  for (char c : text)
    n += (static_cast<unsigned char>(c) & 0xC0) != 0x80; // not a continuation byte
  return n;
}

size_t content_bytes(const v1::Offer& o) {
  size_t n = o.ByteSizeLong();
  if (!o.id().empty())
    n -= wire::TagSize(v1::Offer::kIdFieldNumber, wire::TYPE_STRING) + wire::StringSize(o.id());
  if (o.version() != 0)
    n -= wire::TagSize(v1::Offer::kVersionFieldNumber, wire::TYPE_INT64)
         + wire::Int64Size(o.version());
  if (o.source() != v1::OFFER_SOURCE_UNSPECIFIED)
    n -= wire::TagSize(v1::Offer::kSourceFieldNumber, wire::TYPE_ENUM) + wire::EnumSize(o.source());
  if (o.has_created_at())
    n -= wire::TagSize(v1::Offer::kCreatedAtFieldNumber, wire::TYPE_MESSAGE)
         + wire::MessageSize(o.created_at());
  if (o.has_updated_at())
    n -= wire::TagSize(v1::Offer::kUpdatedAtFieldNumber, wire::TYPE_MESSAGE)
         + wire::MessageSize(o.updated_at());
  return n;
}

std::string check_content(const v1::Offer& o, const offer_limits& l) {
  if (o.seller_id().empty())
    return "offer.seller_id is required";
  if (o.seller_id().size() > max_id_len)
    return "offer.seller_id is longer than 256 bytes";
  if (o.namespace_().size() > max_id_len)
    return "offer.namespace is longer than 256 bytes";
  if (o.external_id().size() > max_id_len)
    return "offer.external_id is longer than 256 bytes";
  if (auto n = chars_over(o.title(), l.title_max_chars))
    return over_limit("offer.title is", n, "characters", l.title_max_chars,
                      "limits.title_max_chars");
  if (auto n = chars_over(o.description(), l.description_max_chars))
    return over_limit("offer.description is", n, "characters", l.description_max_chars,
                      "limits.description_max_chars");
  if (static_cast<uint64_t>(o.attributes_size()) > l.attributes_max)
    return over_limit("offer.attributes has", static_cast<size_t>(o.attributes_size()), "entries",
                      l.attributes_max, "limits.attributes_max");
  for (auto& [key, value] : o.attributes()) {
    if (auto n = chars_over(key, l.attribute_key_max_chars))
      return over_limit("offer.attributes key " + shown(key) + " is", n, "characters",
                        l.attribute_key_max_chars, "limits.attribute_key_max_chars");
    if (auto n = chars_over(value, l.attribute_value_max_chars))
      return over_limit("offer.attributes[" + shown(key) + "] is", n, "characters",
                        l.attribute_value_max_chars, "limits.attribute_value_max_chars");
  }
  if (static_cast<uint64_t>(o.photos_size()) > l.photos_max)
    return over_limit("offer.photos has", static_cast<size_t>(o.photos_size()), "entries",
                      l.photos_max, "limits.photos_max");
  if (o.has_price() && o.price().amount_minor() < 0)
    return "offer.price.amount_minor must not be negative";
  if (o.has_price() && !o.price().currency().empty() && o.price().currency().size() != 3)
    return "offer.price.currency must be a three-letter ISO 4217 code like RUB";
  // Last: a single field over its own limit is the more useful answer.
  if (auto n = content_bytes(o); n > l.offer_max_bytes)
    return over_limit("offer is", n,
                      "bytes serialized (id, version, source and timestamps not counted)",
                      l.offer_max_bytes, "limits.offer_max_bytes");
  return {};
}

} // namespace gost
