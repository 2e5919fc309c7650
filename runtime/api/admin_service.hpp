#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <caf/actor.hpp>

#include "api/limits.hpp"
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
struct trace_context;

/// gost.v1.AdminService: the inspection console (gostctl offer, stages, top, nodes, shards,
/// trace) and its safe verbs (pause, resume, passivate, requeue, retry / discard dead letters),
/// each verb logged with who asked.
class admin_service final : public rpc::guarded<v1::AdminService> {
public:
  struct cluster_view {
    persistence::pg_pool* pool = nullptr;
    std::string node_id;
    std::chrono::milliseconds lease_timeout{};
    /// The cluster manager: applies pauses to this node's shards (pause_atom).
    caf::actor manager;
  };

  /// Who may use the verbs: with a token, only calls carrying it (metadata `x-gost-token`);
  /// without one, only when the API listens on loopback (`console.token`, docs/console.md).
  struct access {
    std::string token;
    bool loopback = true;
    std::string listen; ///< grpc.listen, for the refusal's message
  };

  admin_service(call_hub& hub, router& r, std::shared_ptr<const stage_registry> stages,
                std::shared_ptr<node_stats> stats, std::chrono::milliseconds timeout,
                cluster_view cluster, access acc, api_limits limits = {},
                std::shared_ptr<trace_context> traces = nullptr)
    : hub_(hub), router_(r), stages_(std::move(stages)), stats_(std::move(stats)),
      timeout_(timeout), cluster_(std::move(cluster)), access_(std::move(acc)),
      limits_(std::move(limits)), traces_(std::move(traces)) {
    guard("InspectOffer", &admin_service::InspectOffer);
    guard("ListStages", &admin_service::ListStages);
    guard("ListNodes", &admin_service::ListNodes);
    guard("ListShards", &admin_service::ListShards);
    guard("Top", &admin_service::Top);
    guard("PauseStage", &admin_service::PauseStage);
    guard("ResumeStage", &admin_service::ResumeStage);
    guard("PassivateOffer", &admin_service::PassivateOffer);
    guard("RequeueOffer", &admin_service::RequeueOffer);
    guard("ListDeadLetters", &admin_service::ListDeadLetters);
    guard("RetryDeadLetters", &admin_service::RetryDeadLetters);
    guard("DiscardDeadLetters", &admin_service::DiscardDeadLetters);
    guard("Trace", &admin_service::Trace);
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
  grpc::ServerUnaryReactor* Top(grpc::CallbackServerContext* ctx, const v1::TopRequest* req,
                                v1::TopResponse* resp) override;
  grpc::ServerUnaryReactor* PauseStage(grpc::CallbackServerContext* ctx,
                                       const v1::StageVerbRequest* req,
                                       v1::StageVerbResponse* resp) override;
  grpc::ServerUnaryReactor* ResumeStage(grpc::CallbackServerContext* ctx,
                                        const v1::StageVerbRequest* req,
                                        v1::StageVerbResponse* resp) override;
  grpc::ServerUnaryReactor* PassivateOffer(grpc::CallbackServerContext* ctx,
                                           const v1::PassivateOfferRequest* req,
                                           v1::PassivateOfferResponse* resp) override;
  grpc::ServerUnaryReactor* RequeueOffer(grpc::CallbackServerContext* ctx,
                                         const v1::RequeueOfferRequest* req,
                                         v1::RequeueOfferResponse* resp) override;
  grpc::ServerUnaryReactor* ListDeadLetters(grpc::CallbackServerContext* ctx,
                                            const v1::ListDeadLettersRequest* req,
                                            v1::ListDeadLettersResponse* resp) override;
  grpc::ServerUnaryReactor* RetryDeadLetters(grpc::CallbackServerContext* ctx,
                                             const v1::DeadLettersVerbRequest* req,
                                             v1::DeadLettersVerbResponse* resp) override;
  grpc::ServerUnaryReactor* DiscardDeadLetters(grpc::CallbackServerContext* ctx,
                                               const v1::DeadLettersVerbRequest* req,
                                               v1::DeadLettersVerbResponse* resp) override;
  grpc::ServerWriteReactor<v1::TraceEvent>* Trace(grpc::CallbackServerContext* ctx,
                                                  const v1::TraceRequest* req) override;

private:
  /// OK when the call may use a verb; else the refusal, naming `console.token`.
  grpc::Status allowed(grpc::CallbackServerContext* ctx, const char* verb) const;
  /// Pause (true) or resume (false) a stage.
  grpc::ServerUnaryReactor* stage_verb(grpc::CallbackServerContext* ctx,
                                       const v1::StageVerbRequest* req, v1::StageVerbResponse* resp,
                                       bool pause);
  /// Retry (true) or discard (false) dead letters.
  grpc::ServerUnaryReactor* dead_letter_verb(grpc::CallbackServerContext* ctx,
                                             const v1::DeadLettersVerbRequest* req,
                                             v1::DeadLettersVerbResponse* resp, bool retry);

  call_hub& hub_;
  router& router_;
  std::shared_ptr<const stage_registry> stages_;
  std::shared_ptr<node_stats> stats_;
  std::chrono::milliseconds timeout_;
  cluster_view cluster_;
  access access_;
  api_limits limits_;
  std::shared_ptr<trace_context> traces_; ///< null: no traces (a node without a cluster part)
};

} // namespace gost::runtime
