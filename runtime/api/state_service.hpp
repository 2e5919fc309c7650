#pragma once

#include <chrono>

#include "api/limits.hpp"
#include "gost/v1/state_service.grpc.pb.h"
#include "rpc/parse_guard.hpp"

namespace gost {
class call_hub;
}

namespace gost::runtime {

class router;

/// gost.v1.StateService: a stage's state of an offer, read and compare-and-set through the
/// offer's actor (on whichever node owns its shard), like offer_service's calls.
class state_service final : public rpc::guarded<v1::StateService> {
public:
  state_service(call_hub& hub, router& r, std::chrono::milliseconds timeout, api_limits limits)
    : hub_(hub), router_(r), timeout_(timeout), limits_(limits) {
    guard("Read", &state_service::Read);
    guard("Update", &state_service::Update);
    require_all_guarded();
  }

  grpc::ServerUnaryReactor* Read(grpc::CallbackServerContext* ctx, const v1::ReadStateRequest* req,
                                 v1::ReadStateResponse* resp) override;
  grpc::ServerUnaryReactor* Update(grpc::CallbackServerContext* ctx,
                                   const v1::UpdateStateRequest* req,
                                   v1::UpdateStateResponse* resp) override;

private:
  call_hub& hub_;
  router& router_;
  std::chrono::milliseconds timeout_;
  api_limits limits_;
};

} // namespace gost::runtime
