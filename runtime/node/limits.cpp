#include "node/limits.hpp"

#include <algorithm>
#include <limits>

namespace gost::runtime {

offer_limits offer_limits_of(const config::limits_config& c) {
  offer_limits l;
  l.title_max_chars = c.title_max_chars;
  l.description_max_chars = c.description_max_chars;
  l.attributes_max = c.attributes_max;
  l.attribute_key_max_chars = c.attribute_key_max_chars;
  l.attribute_value_max_chars = c.attribute_value_max_chars;
  l.photos_max = c.photos_max;
  l.offer_max_bytes = c.offer_max_bytes;
  return l;
}

api_limits api_limits_of(const config::limits_config& c) {
  api_limits l;
  l.offer = offer_limits_of(c);
  l.page_size_max = c.page_size_max;
  l.page_max_bytes = c.page_max_bytes;
  l.state_max_bytes = c.state_max_bytes;
  l.event_max_bytes = c.event_max_bytes;
  l.trace_events_max = c.trace_events_max;
  l.trace_duration_max_ms = c.trace_duration_max.count();
  l.traces_max = c.traces_max;
  return l;
}

int link_max_bytes(const config::limits_config& c) {
  return static_cast<int>(
    std::min<int64_t>(2LL * c.request_max_bytes, std::numeric_limits<int>::max()));
}

} // namespace gost::runtime
