#include "api/entity_service.hpp"

#include "api/pull_across.hpp"

#include <google/protobuf/util/time_util.h>

#include <caf/event_based_actor.hpp>

#include "api/call.hpp"
#include "api/entity_view.hpp"
#include "api/pull_across.hpp"
#include "cluster/builtin_kinds.hpp"
#include "cluster/router.hpp"
#include "gost/core/call_hub.hpp"
#include "gost/entities/entity_type.hpp"
#include "gost/offers/content_rules.hpp" // max_id_len
#include "gost/persistence/cluster/placement.hpp"
#include "gost/persistence/entities/entities.hpp"

namespace gost::runtime {

using google::protobuf::util::TimeUtil;

std::string check_entity(const entity_registry& types, const std::string& kind,
                         const std::string& id, std::string& key, grpc::StatusCode& code) {
  code = grpc::StatusCode::INVALID_ARGUMENT;
  if (kind.empty())
    return "kind is required (ListTypes lists the kinds this node hosts)";
  if (types.find(kind) == nullptr) {
    code = grpc::StatusCode::NOT_FOUND;
    return "kind: `" + kind + "` is not an entity type of this node (ListTypes lists them)";
  }
  if (id.empty() || id.size() > max_id_len)
    return "id must be 1..256 bytes";
  key = persistence::entity_key(kind, id);
  return {};
}

namespace {

/// The checks Send and Ask share: kind, id, event (present, within the size limit; its type is
/// checked by the owner) and request id. OK with `key` set, or the status to answer.
template <class Request>
grpc::Status check_event_request(const entity_registry& types, const api_limits& limits,
                                 const Request& req, std::string& key) {
  grpc::StatusCode code;
  if (auto problem = check_entity(types, req.kind(), req.id(), key, code); !problem.empty())
    return {code, problem};
  auto want = types.find(req.kind())->event_descriptor()->full_name();
  if (!req.has_event() || req.event().type_url().empty())
    return invalid("event is required: a google.protobuf.Any holding a " + want);
  if (auto problem = check_event_size("event", req.event().ByteSizeLong(), limits);
      !problem.empty())
    return invalid(problem);
  if (req.request_id().size() > max_id_len)
    return invalid("request_id must be at most 256 bytes");
  return grpc::Status::OK;
}

} // namespace

grpc::ServerUnaryReactor* entity_service::Send(grpc::CallbackServerContext* ctx,
                                               const v1::SendEventRequest* req,
                                               v1::SendEventResponse*) {
  unary_call call{ctx, timeout_};
  std::string key;
  if (auto st = check_event_request(*types_, limits_, *req, key); !st.ok())
    return call.fail(st);
  int64_t delay_ms = 0;
  if (req->has_delay()) {
    delay_ms = TimeUtil::DurationToMilliseconds(req->delay());
    if (delay_ms < 0)
      return call.fail(invalid("delay must not be negative"));
  }
  auto deadline = call.deadline();
  auto& r = router_;
  any_msg event{req->event()};
  auto request_id = req->request_id();
  hub_.run([=, &r](caf::event_based_actor* self) {
    ask_entity_owner(
      self, r, deadline, [=](ok_atom) { call.ok(); }, call.on_error(), send_atom_v, key, event,
      request_id, delay_ms);
  });
  return call.reactor();
}

grpc::ServerUnaryReactor* entity_service::Ask(grpc::CallbackServerContext* ctx,
                                              const v1::AskEntityRequest* req,
                                              v1::AskEntityResponse* resp) {
  unary_call call{ctx, timeout_};
  std::string key;
  if (auto st = check_event_request(*types_, limits_, *req, key); !st.ok())
    return call.fail(st);
  auto deadline = call.deadline();
  auto& r = router_;
  any_msg event{req->event()};
  ask_id id{req->request_id()};
  hub_.run([=, &r](caf::event_based_actor* self) {
    ask_entity_owner(
      self, r, deadline,
      [=](entity_reply& a) {
        if (a.reply)
          *resp->mutable_reply() = std::move(*a.reply);
        resp->set_version(a.version);
        call.ok();
      },
      call.on_error(), ask_atom_v, key, event, id);
  });
  return call.reactor();
}

grpc::ServerUnaryReactor* entity_service::Get(grpc::CallbackServerContext* ctx,
                                              const v1::GetEntityRequest* req,
                                              v1::GetEntityResponse* resp) {
  unary_call call{ctx, timeout_};
  std::string key;
  grpc::StatusCode code;
  if (auto problem = check_entity(*types_, req->kind(), req->id(), key, code); !problem.empty())
    return call.fail({code, problem});
  auto deadline = call.deadline();
  auto& r = router_;
  hub_.run([=, &r](caf::event_based_actor* self) {
    ask_entity_owner(
      self, r, deadline,
      [=](entity_view& v) {
        put_view(v, *resp);
        call.ok();
      },
      call.on_error(), view_atom_v, key);
  });
  return call.reactor();
}

grpc::ServerUnaryReactor* entity_service::PullOutputs(grpc::CallbackServerContext* ctx,
                                                      const v1::PullOutputsRequest* req,
                                                      v1::PullOutputsResponse* resp) {
  unary_call call{ctx, timeout_};
  if (types_->find(req->kind()) == nullptr)
    return call.fail({grpc::StatusCode::NOT_FOUND,
                      "kind: `" + req->kind() + "` is not an entity type of this node"});
  uint32_t asked = 0;
  if (auto problem = check_page_size("limit", req->limit(), limits_, asked); !problem.empty())
    return call.fail(invalid(problem));
  pull_start_point start;
  if (auto problem = pull_start(req->after(), req->after_token(), start); !problem.empty())
    return call.fail(invalid(problem));
  auto limit = static_cast<size_t>(asked);
  auto kind = req->kind();
  auto lane = req->lane();
  auto where = where_;
  // A blocking read: off the scheduler threads (rare, and bounded by `limit`).
  hub_.run_blocking([=] {
    auto page = pull_outputs(*where, kind, lane, start, limit);
    if (!page)
      return call.finish(page.error());
    for (auto& o : page->rows) {
      auto* out = resp->add_outputs();
      out->set_seq(o.seq);
      out->set_id(o.entity_id);
      out->mutable_output()->ParseFromString(o.payload);
    }
    put_position(*page, *resp);
    call.ok();
  });
  return call.reactor();
}

grpc::ServerUnaryReactor* entity_service::ListTypes(grpc::CallbackServerContext* ctx,
                                                    const v1::ListTypesRequest*,
                                                    v1::ListTypesResponse* resp) {
  unary_call call{ctx, timeout_};
  for (auto& t : types_->all()) {
    auto* out = resp->add_types();
    out->set_kind(t->kind());
    out->set_state_type(t->state_descriptor()->full_name());
    out->set_event_type(t->event_descriptor()->full_name());
    if (auto* reply = t->reply_descriptor())
      out->set_reply_type(reply->full_name());
  }
  return call.fail(grpc::Status::OK);
}

} // namespace gost::runtime
