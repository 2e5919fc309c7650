#pragma once
// The kit's view of an actor's events (gost/core/kit/trail.hpp) as gost.v1.TraceEvent and back:
// the console's API, the node links' answers and the live trace use the same message.

#include <string>

#include <google/protobuf/util/time_util.h>

#include "gost/core/kit/trail.hpp"
#include "gost/v1/admin.pb.h"

namespace gost::runtime {

inline void to_proto(const kit::event_view& e, const std::string& offer_id, uint32_t shard,
                     const std::string& node, v1::TraceEvent& out) {
  // A durable entity's key holds a '/' (kind/id); an offer id never does.
  if (offer_id.find('/') != std::string::npos)
    out.set_entity_key(offer_id);
  else
    out.set_offer_id(offer_id);
  out.set_shard(shard);
  out.set_node(node);
  out.set_kind(kit::to_string(e.kind));
  out.set_source(kit::to_string(e.source));
  out.set_stage(e.lane);
  out.set_result(kit::to_string(e.result));
  out.set_duration_us(e.duration_us);
  out.set_version(e.version);
  *out.mutable_at() = google::protobuf::util::TimeUtil::MicrosecondsToTimestamp(e.at_us);
}

inline kit::event_view from_proto(const v1::TraceEvent& in) {
  kit::event_view e;
  e.kind = kit::kind_of(in.kind());
  e.source = kit::source_of(in.source());
  e.result = kit::result_of(in.result());
  e.lane = in.stage();
  e.duration_us = static_cast<uint32_t>(in.duration_us());
  e.version = in.version();
  e.at_us = google::protobuf::util::TimeUtil::TimestampToMicroseconds(in.at());
  return e;
}

} // namespace gost::runtime
