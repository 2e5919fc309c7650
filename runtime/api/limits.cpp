#include "api/limits.hpp"

#include <algorithm>

#include <google/protobuf/wire_format_lite.h>

namespace gost::runtime {

std::string check_page_size(const char* field, int32_t asked, const api_limits& l, uint32_t& out) {
  if (asked < 0)
    return std::string{field} + " must not be negative (0: 100, at most "
           + std::to_string(l.page_size_max) + ")";
  if (static_cast<uint32_t>(asked) > l.page_size_max)
    return over_limit(std::string{field} + " is", static_cast<uint64_t>(asked), "items",
                      l.page_size_max, "limits.page_size_max");
  out = asked == 0 ? std::min<uint32_t>(100, l.page_size_max) : static_cast<uint32_t>(asked);
  return {};
}

std::string check_state_size(size_t bytes, const api_limits& l) {
  if (bytes <= l.state_max_bytes)
    return {};
  return over_limit("state is", bytes, "bytes packed", l.state_max_bytes, "limits.state_max_bytes")
         + "; keep stage states small";
}

std::string check_event_size(size_t bytes, const api_limits& l) {
  if (bytes <= l.event_max_bytes)
    return {};
  return over_limit("event is", bytes, "bytes packed", l.event_max_bytes, "limits.event_max_bytes");
}

size_t page_fit(const std::vector<v1::Offer>& offers, const api_limits& l) {
  using wire = google::protobuf::internal::WireFormatLite;
  uint64_t bytes = 0;
  size_t n = 0;
  for (auto& o : offers) {
    // As the offer is in the reply: a length-delimited field 1 of ListOffersResponse.
    bytes += 1 + wire::LengthDelimitedSize(o.ByteSizeLong());
    if (n > 0 && bytes > l.page_max_bytes)
      break;
    ++n;
  }
  return n;
}

} // namespace gost::runtime
