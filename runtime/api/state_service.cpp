#include "api/state_service.hpp"

#include <caf/event_based_actor.hpp>

#include "api/call.hpp"
#include "cluster/builtin_kinds.hpp"
#include "gost/core/call_hub.hpp"
#include "gost/offers/content_rules.hpp" // max_id_len
#include "gost/offers/protocol.hpp"
#include "rpc/caller.hpp"

namespace gost::runtime {

namespace {

std::string check_ids(const std::string& offer_id, const std::string& stage_id) {
  if (offer_id.empty() || offer_id.size() > max_id_len)
    return "offer_id must be 1..256 bytes";
  if (stage_id.empty() || stage_id.size() > max_id_len)
    return "stage_id must be 1..256 bytes (gostctl stages lists the stages)";
  return {};
}

} // namespace

grpc::ServerUnaryReactor* state_service::Read(grpc::CallbackServerContext* ctx,
                                              const v1::ReadStateRequest* req,
                                              v1::ReadStateResponse* resp) {
  unary_call call{ctx, timeout_};
  if (auto problem = check_ids(req->offer_id(), req->stage_id()); !problem.empty())
    return call.fail(invalid(problem));
  auto deadline = call.deadline();
  auto& r = router_;
  auto id = req->offer_id();
  auto stage = req->stage_id();
  hub_.run([=, &r](caf::event_based_actor* self) {
    ask_owner(
      self, r, deadline,
      [=](state_read_msg& m) {
        *resp = std::move(m.value);
        call.ok();
      },
      call.on_error(), get_atom_v, state_atom_v, id, stage);
  });
  return call.reactor();
}

grpc::ServerUnaryReactor* state_service::Update(grpc::CallbackServerContext* ctx,
                                                const v1::UpdateStateRequest* req,
                                                v1::UpdateStateResponse* resp) {
  unary_call call{ctx, timeout_};
  std::string problem = check_ids(req->offer_id(), req->stage_id());
  if (problem.empty() && (!req->has_state() || req->state().type_url().empty()))
    problem = "state is required: a google.protobuf.Any with type_url set (a packed message)";
  if (problem.empty())
    problem = check_state_size(req->state().ByteSizeLong(), limits_);
  if (problem.empty() && req->request_id().size() > max_id_len)
    problem = "request_id must be at most 256 bytes";
  if (problem.empty() && req->expected_version() < 0)
    problem = "expected_version must be >= 0 (0: the stage has no state yet; Read gives the "
              "current version)";
  if (!problem.empty())
    return call.fail(invalid(problem));
  auto deadline = call.deadline();
  auto& r = router_;
  auto id = req->offer_id();
  auto stage = req->stage_id();
  auto bytes = req->state().SerializeAsString();
  int64_t expected = req->expected_version();
  auto rid = request_id{req->request_id(), {}, rpc::caller_of(*ctx)};
  hub_.run([=, &r](caf::event_based_actor* self) {
    ask_owner(
      self, r, deadline,
      [=](state_update_msg& m) {
        *resp = std::move(m.value);
        call.ok();
      },
      call.on_error(), update_atom_v, state_atom_v, id, stage, bytes, expected, rid);
  });
  return call.reactor();
}

} // namespace gost::runtime
