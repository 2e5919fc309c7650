#pragma once

#include <chrono>
#include <memory>

#include <caf/fwd.hpp>

#include "gost/actors/stage.hpp"
#include "gost/actors/stats.hpp"
#include "gost/v1/admin.grpc.pb.h"

namespace gost::runtime {

class router;

/// gost.v1.AdminService: the read side of the inspection console (gostctl offer, stages).
class admin_service final : public v1::AdminService::CallbackService {
public:
  admin_service(caf::actor_system& sys, router& r, std::shared_ptr<const stage_registry> stages,
                std::shared_ptr<node_stats> stats, std::chrono::milliseconds timeout)
    : sys_(sys), router_(r), stages_(std::move(stages)), stats_(std::move(stats)),
      timeout_(timeout) {}

  grpc::ServerUnaryReactor* InspectOffer(grpc::CallbackServerContext* ctx,
                                         const v1::InspectOfferRequest* req,
                                         v1::InspectOfferResponse* resp) override;
  grpc::ServerUnaryReactor* ListStages(grpc::CallbackServerContext* ctx,
                                       const v1::ListStagesRequest* req,
                                       v1::ListStagesResponse* resp) override;

private:
  caf::actor_system& sys_;
  router& router_;
  std::shared_ptr<const stage_registry> stages_;
  std::shared_ptr<node_stats> stats_;
  std::chrono::milliseconds timeout_;
};

} // namespace gost::runtime
