#pragma once

#include <chrono>
#include <functional>

#include <caf/fwd.hpp>

#include "gost/v1/state_service.grpc.pb.h"
#include "metrics.hpp"

namespace gost::runtime {

class router;

/// gost.v1.StateService: a stage's state of an offer, read and compare-and-set through the
/// offer's actor (on whichever node owns its shard), like offer_service's calls.
class state_service final : public v1::StateService::CallbackService {
public:
  state_service(caf::actor_system& sys, router& r, metrics& m, std::chrono::milliseconds timeout)
    : sys_(sys), router_(r), metrics_(m), timeout_(timeout) {}

  grpc::ServerUnaryReactor* Read(grpc::CallbackServerContext* ctx, const v1::ReadStateRequest* req,
                                 v1::ReadStateResponse* resp) override;
  grpc::ServerUnaryReactor* Update(grpc::CallbackServerContext* ctx,
                                   const v1::UpdateStateRequest* req,
                                   v1::UpdateStateResponse* resp) override;

private:
  caf::actor_system& sys_;
  router& router_;
  metrics& metrics_;
  std::chrono::milliseconds timeout_;
};

} // namespace gost::runtime
