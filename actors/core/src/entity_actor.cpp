#include "gost/core/kit/entity_actor.hpp"

namespace gost::kit {

event_result result_of(const caf::error& err) {
  if (err == errc::not_found)
    return event_result::not_found;
  if (err == errc::conflict || err == errc::already_exists)
    return event_result::conflict;
  if (err == errc::fenced)
    return event_result::fenced;
  return event_result::failed;
}

caf::error fenced_error(uint32_t shard) {
  return make_error(errc::fenced,
                    "shard " + std::to_string(shard) + " is no longer owned by this node");
}

} // namespace gost::kit
