#pragma once
// An entity's stored view (gost/entities/protocol.hpp) into the API's responses.

#include <google/protobuf/util/time_util.h>

#include "gost/entities/protocol.hpp"

namespace gost::runtime {

/// An entity's stored view into a response with the fields of GetEntityResponse (exists,
/// version, state, lane, pending_events, next_due, timers): EntityService.Get's and
/// AdminService.InspectEntity's.
template <class Response>
void put_view(entity_view& v, Response& resp) {
  resp.set_exists(v.exists);
  resp.set_version(v.version);
  if (v.state)
    *resp.mutable_state() = std::move(*v.state);
  resp.set_lane(v.lane);
  resp.set_pending_events(v.pending);
  if (v.next_due_us > 0)
    *resp.mutable_next_due() =
      google::protobuf::util::TimeUtil::MicrosecondsToTimestamp(v.next_due_us);
  for (auto& t : v.timers) {
    auto* out = resp.add_timers();
    out->set_name(t.name);
    *out->mutable_due() = google::protobuf::util::TimeUtil::MicrosecondsToTimestamp(t.due_at_us);
  }
}

} // namespace gost::runtime
