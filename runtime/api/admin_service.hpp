#pragma once

#include <chrono>
#include <memory>

#include "gost/core/stats.hpp"
#include "gost/offers/stage.hpp"
#include "gost/v1/admin.grpc.pb.h"
#include "rpc/parse_guard.hpp"

namespace gost::persistence {
class pg_pool;
}

namespace gost {
class call_hub;
}

namespace gost::runtime {

class router;

/// gost.v1.AdminService: the read side of the inspection console (gostctl offer, stages).
class admin_service final : public rpc::guarded<v1::AdminService> {
public:
  struct cluster_view {
    persistence::pg_pool* pool = nullptr;
    std::string node_id;
    std::chrono::milliseconds lease_timeout{};
  };

  admin_service(call_hub& hub, router& r, std::shared_ptr<const stage_registry> stages,
                std::shared_ptr<node_stats> stats, std::chrono::milliseconds timeout,
                cluster_view cluster)
    : hub_(hub), router_(r), stages_(std::move(stages)), stats_(std::move(stats)),
      timeout_(timeout), cluster_(std::move(cluster)) {
    guard("InspectOffer", &admin_service::InspectOffer);
    guard("ListStages", &admin_service::ListStages);
    guard("ListNodes", &admin_service::ListNodes);
    guard("ListShards", &admin_service::ListShards);
    require_all_guarded();
  }

  grpc::ServerUnaryReactor* InspectOffer(grpc::CallbackServerContext* ctx,
                                         const v1::InspectOfferRequest* req,
                                         v1::InspectOfferResponse* resp) override;
  grpc::ServerUnaryReactor* ListStages(grpc::CallbackServerContext* ctx,
                                       const v1::ListStagesRequest* req,
                                       v1::ListStagesResponse* resp) override;
  grpc::ServerUnaryReactor* ListNodes(grpc::CallbackServerContext* ctx,
                                      const v1::ListNodesRequest* req,
                                      v1::ListNodesResponse* resp) override;
  grpc::ServerUnaryReactor* ListShards(grpc::CallbackServerContext* ctx,
                                       const v1::ListShardsRequest* req,
                                       v1::ListShardsResponse* resp) override;

private:
  call_hub& hub_;
  router& router_;
  std::shared_ptr<const stage_registry> stages_;
  std::shared_ptr<node_stats> stats_;
  std::chrono::milliseconds timeout_;
  cluster_view cluster_;
};

} // namespace gost::runtime
