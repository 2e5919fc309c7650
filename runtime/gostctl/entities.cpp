// gostctl, durable entities of the application's actor types: types (AdminService.DescribeTypes),
// entity (AdminService.InspectEntity) and send (EntityService.Send).
#include "gostctl/cli.hpp"

#include <cstdio>

#include <google/protobuf/util/time_util.h>

#include "gost/v1/entity_service.grpc.pb.h"
#include "gostctl/entity_json.hpp"
#include "gostctl/print.hpp"

namespace gost::ctl {

namespace {

int types(const cli& c) {
  auto admin = admin_stub(c);
  grpc::ClientContext ctx;
  call_context(ctx, c);
  gost::v1::DescribeTypesResponse resp;
  auto s = admin->DescribeTypes(&ctx, gost::v1::DescribeTypesRequest{}, &resp);
  if (!s.ok())
    return fail(s);
  std::printf("%-7s %-24s %-32s %s\n", "kind", "id", "state type", "event type / note");
  for (auto& t : resp.types())
    std::printf("%-7s %-24s %-32s %s\n",
                t.kind() == gost::v1::PublishedType::STAGE ? "stage" : "entity", t.id().c_str(),
                t.state_type().empty() ? "-" : t.state_type().c_str(),
                t.event_type().empty() ? t.note().c_str() : t.event_type().c_str());
  std::printf("%d file(s) published\n", resp.files().file_size());
  return 0;
}

int entity(const cli& c) {
  auto admin = admin_stub(c);
  grpc::ClientContext ctx;
  call_context(ctx, c);
  if (c.positional.size() != 2) {
    std::fputs("gostctl entity: give KIND ID (gostctl types lists the kinds)\n", stderr);
    return 2;
  }
  gost::v1::InspectEntityRequest req;
  req.set_kind(c.positional[0]);
  req.set_id(c.positional[1]);
  gost::v1::InspectEntityResponse resp;
  auto s = admin->InspectEntity(&ctx, req, &resp);
  if (!s.ok())
    return fail(s);
  if (!resp.exists()) {
    std::printf("entity %s: nothing was ever sent to it (shard %u)\n", resp.entity_key().c_str(),
                resp.shard());
    return 1;
  }
  std::printf("entity %s  version %lld  shard %u  lane %s  %s\n", resp.entity_key().c_str(),
              static_cast<long long>(resp.version()), resp.shard(),
              resp.lane().empty() ? "-" : resp.lane().c_str(), residency(resp).c_str());
  print_activity(resp);
  std::printf(
    "pending events: %lld%s%s\n", static_cast<long long>(resp.pending_events()),
    resp.has_next_due() ? ", next due " : "",
    resp.has_next_due() ? google::protobuf::util::TimeUtil::ToString(resp.next_due()).c_str() : "");
  for (auto& t : resp.timers())
    std::printf("named timer %s: due %s\n", t.name().c_str(),
                google::protobuf::util::TimeUtil::ToString(t.due()).c_str());
  auto types = node_types(*admin, c);
  std::printf("state: %s\n", resp.has_state() ? types->render(resp.state()).c_str() : "(none yet)");
  return 0;
}

/// What send and ask share: KIND ID --json EVENT [--request-id R] into `req`, the event
/// encoded with the types the node publishes. Null after printing why (exit code in `rc`).
template <class Request>
std::unique_ptr<kind_codec> entity_event(const cli& c, Request& req, int& rc) {
  rc = 2;
  if (c.positional.size() != 2 || !has(c, "json")) {
    std::fprintf(stderr,
                 "gostctl %s: give KIND ID --json EVENT (gostctl types lists the kinds and their "
                 "event types)\n",
                 c.cmd.c_str());
    return nullptr;
  }
  req.set_kind(c.positional[0]);
  req.set_id(c.positional[1]);
  req.set_request_id(opt(c, "request-id"));
  auto codec = kind_codec::load(c, req.kind(), rc);
  if (!codec || !codec->encode(c, opt(c, "json"), *req.mutable_event())) {
    rc = codec ? 2 : rc;
    return nullptr;
  }
  return codec;
}

/// send KIND ID --json EVENT [--delay DURATION] [--request-id R]
int send(const cli& c) {
  v1::SendEventRequest req;
  if (has(c, "delay")) {
    auto ms = duration_ms(opt(c, "delay"));
    if (ms < 0) {
      std::fprintf(stderr, "gostctl send: --delay `%s` is not a duration (250ms, 90s, 5m, 1h)\n",
                   opt(c, "delay").c_str());
      return 2;
    }
    *req.mutable_delay() = google::protobuf::util::TimeUtil::MillisecondsToDuration(ms);
  }
  int rc = 0;
  auto codec = entity_event(c, req, rc);
  if (!codec)
    return rc;
  auto entities = v1::EntityService::NewStub(channel(c));
  grpc::ClientContext ctx;
  call_context(ctx, c);
  v1::SendEventResponse resp;
  if (auto s = entities->Send(&ctx, req, &resp); !s.ok())
    return fail(s);
  std::printf("sent a %s to %s/%s%s%s: committed\n", codec->event_type().c_str(),
              req.kind().c_str(), req.id().c_str(),
              req.has_delay() ? (", handled in " + opt(c, "delay")).c_str() : "",
              req.request_id().empty() ? "" : (" (request id " + req.request_id() + ")").c_str());
  return 0;
}

const char* refusal_name(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    default: return nullptr;
  }
}

/// ask KIND ID --json EVENT [--request-id R]
int ask(const cli& c) {
  v1::AskEntityRequest req;
  int rc = 0;
  auto codec = entity_event(c, req, rc);
  if (!codec)
    return rc;
  auto entities = v1::EntityService::NewStub(channel(c));
  grpc::ClientContext ctx;
  call_context(ctx, c);
  v1::AskEntityResponse resp;
  if (auto s = entities->Ask(&ctx, req, &resp); !s.ok()) {
    // A refusal is the handler's answer: its code and message, as the caller would get them.
    if (auto* name = refusal_name(s.error_code())) {
      std::printf("refused (%s): %s\n", name, s.error_message().c_str());
      return 1;
    }
    return fail(s);
  }
  std::printf("%s/%s  version %lld\nreply: %s\n", req.kind().c_str(), req.id().c_str(),
              static_cast<long long>(resp.version()),
              resp.has_reply() ? codec->to_json(resp.reply()).c_str() : "(none)");
  return 0;
}

} // namespace

std::vector<command> entity_commands() {
  return {
    {"types", "entities", "", "the protobuf types the node publishes (stage states, actor types)",
     types},
    {"entity", "entities", "KIND ID",
     "inspect a durable entity of an actor type (a task, ...): version,\n"
     "lane, pending events, its state decoded, and, as `offer` shows,\n"
     "its actor's recent events (send, run), what it waits on, owner",
     entity},
    {"send", "entities", "KIND ID --json EVENT [--delay DURATION] [--request-id R]",
     "send an event to a durable entity (EntityService.Send): EVENT is\n"
     "the kind's event type (gostctl types) in proto3 JSON, encoded with\n"
     "the types the node publishes; --delay handles it no earlier than\n"
     "that from now (90s, 5m, 250ms); --request-id makes a retry store\n"
     "nothing twice",
     send},
    {"ask", "entities", "KIND ID --json EVENT [--request-id R]",
     "ask a durable entity (EntityService.Ask): the event is handled at\n"
     "once and its reply printed as JSON with the entity's version, or\n"
     "its refusal (code and message; exit 1); --request-id makes a retry\n"
     "get the first answer",
     ask},
  };
}

} // namespace gost::ctl
