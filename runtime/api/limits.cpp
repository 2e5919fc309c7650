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

std::string check_trace(int64_t max_events, int64_t for_ms, const api_limits& l, uint32_t& events,
                        int64_t& ms) {
  if (max_events < 0)
    return "max_events " + std::to_string(max_events) + " is negative";
  if (for_ms < 0)
    return "for_ms " + std::to_string(for_ms) + " is negative";
  if (max_events > static_cast<int64_t>(l.trace_events_max))
    return "max_events " + std::to_string(max_events) + " is over the limit of "
           + std::to_string(l.trace_events_max) + " (limits.trace_events_max)";
  if (for_ms > l.trace_duration_max_ms)
    return "for_ms " + std::to_string(for_ms) + " is over the limit of "
           + std::to_string(l.trace_duration_max_ms) + " ms (limits.trace_duration_max)";
  events = max_events == 0 ? std::min<uint32_t>(1000, l.trace_events_max)
                           : static_cast<uint32_t>(max_events);
  ms = for_ms == 0 ? std::min<int64_t>(60'000, l.trace_duration_max_ms) : for_ms;
  return {};
}

std::string check_state_size(size_t bytes, const api_limits& l) {
  if (bytes <= l.state_max_bytes)
    return {};
  return over_limit("state is", bytes, "bytes packed", l.state_max_bytes, "limits.state_max_bytes")
         + "; keep stage states small";
}

std::string check_event_size(const char* field, size_t bytes, const api_limits& l) {
  if (bytes <= l.event_max_bytes)
    return {};
  return over_limit(std::string{field} + " is", bytes, "bytes packed", l.event_max_bytes,
                    "limits.event_max_bytes");
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
