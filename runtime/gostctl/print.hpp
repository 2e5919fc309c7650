#pragma once
// What several commands print alike: messages as JSON, states decoded with the types the node
// publishes, trace events, and what an inspection tells of an actor (offer, entity, task).

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <google/protobuf/message.h>
#include <google/protobuf/timestamp.pb.h>

#include "gost/v1/admin.grpc.pb.h"
#include "gostctl/cli.hpp"
#include "rpc/proto_types.hpp"

namespace gost::ctl {

/// A message as indented JSON, field names as in the .proto.
void print_json(const google::protobuf::Message& m);

/// The types the node publishes (AdminService.DescribeTypes), plus gostctl's own API messages
/// `envelopes` (a reply that holds Anys): states, inputs and results decode with the node's
/// files, never with types linked into gostctl, so a type gostctl was not built with decodes.
std::unique_ptr<runtime::rpc::type_pool>
node_types(v1::AdminService::Stub& admin, const cli& c,
           const std::vector<const google::protobuf::Descriptor*>& envelopes = {});

/// A reply holding Anys, as JSON decoded through `pool` (print_json's format).
void print_decoded(const runtime::rpc::type_pool& pool, const google::protobuf::Message& m);

/// The time of day of a timestamp (17:00:00.123456Z).
std::string short_time(const google::protobuf::Timestamp& t);

/// One trace event as a line; `with_offer`: the offer id (or entity key) too.
void print_event(const v1::TraceEvent& e, bool with_offer);

/// What an inspection tells of the actor on the owner node (InspectOffer, InspectEntity):
/// residency, owner, epoch, write lag, what it waits on, the event in progress, recent events.
template <class Response>
void print_activity(const Response& resp) {
  if (!resp.owner().empty()) {
    std::printf("owner %s  epoch %lld  write lag %lld ms", resp.owner().c_str(),
                static_cast<long long>(resp.epoch()), static_cast<long long>(resp.write_lag_ms()));
    if (resp.resident())
      std::printf("  waiting on %s%s", resp.waiting().c_str(),
                  resp.waiting() == "nothing" || resp.waiting().empty()
                    ? ""
                    : (" for " + std::to_string(resp.waiting_ms()) + " ms").c_str());
    std::printf("\n");
  }
  if (resp.has_current()) {
    std::printf("in progress:\n");
    print_event(resp.current(), false);
  }
  if (resp.resident()) {
    std::printf("recent events (oldest first; time, node, kind, source, stage, result, "
                "duration, version):\n");
    if (resp.recent().empty())
      std::printf("  (none)\n");
    for (auto& e : resp.recent())
      print_event(e, false);
  }
}

/// Residency as one phrase (an inspection's mailbox is -1 when the actor was busy).
template <class Response>
std::string residency(const Response& resp) {
  if (!resp.resident())
    return "not resident";
  return resp.mailbox() >= 0
           ? "resident, " + std::to_string(resp.mailbox()) + " message(s) in its mailbox"
           : std::string{"resident, busy in an event"};
}

} // namespace gost::ctl
