#pragma once
// What a client may put into an offer: checked at every edge (gRPC, feed exchange) before
// anything reaches an actor, and again by the offer entity on the offer as it will be stored
// (a masked update merged with the stored fields).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "gost/v1/offer.pb.h"

namespace gost {

/// Ids (offer, seller, namespace, external id, request id, stage id) are fixed at 256 bytes:
/// they are keys in PostgreSQL's indexes, node links and Kafka, not a marketplace's choice
/// (docs/adr/0006-limits.md).
constexpr size_t max_id_len = 256;

/// The limits of an offer's content that an operator sets (config keys `limits.*`, mapped
/// once at start in runtime/node/limits.cpp; the defaults here are the keys' defaults). Text
/// is measured in characters — Unicode code points of its UTF-8, what a seller counts —,
/// the offer in bytes of its serialized content. A check's message names the field, the
/// value, the limit and the key that sets it.
struct offer_limits {
  uint32_t title_max_chars = 512;            ///< limits.title_max_chars
  uint32_t description_max_chars = 65'536;   ///< limits.description_max_chars
  uint32_t attributes_max = 500;             ///< limits.attributes_max
  uint32_t attribute_key_max_chars = 256;    ///< limits.attribute_key_max_chars
  uint32_t attribute_value_max_chars = 4096; ///< limits.attribute_value_max_chars
  uint32_t photos_max = 100;                 ///< limits.photos_max
  uint64_t offer_max_bytes = 512 * 1024;     ///< limits.offer_max_bytes
};

/// Characters (Unicode code points) of UTF-8 text; protobuf strings are valid UTF-8.
size_t utf8_chars(std::string_view text) noexcept;

/// The serialized size of what a client sets in an offer: every field but those gost assigns
/// or defaults (id, version, source, created_at, updated_at), so an offer measures the same on
/// create, as stored, on update and through a feed.
size_t content_bytes(const v1::Offer& o);

/// The refusal of a value over a configured limit, one phrase for every limit: `what` is the
/// field with its verb ("offer.title is", "offer.photos has") →
/// "offer.title is 700 characters; the limit is 512 (limits.title_max_chars)".
std::string over_limit(const std::string& what, uint64_t value, const char* unit, uint64_t limit,
                       const char* key);

/// Checks what a client may set. Returns the first problem, naming the field (and for a
/// limit its value, the limit and its key), or an empty string.
std::string check_content(const v1::Offer& o, const offer_limits& limits);

} // namespace gost
