#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <caf/actor.hpp>

#include "api/limits.hpp"
#include "cluster/manager.hpp"
#include "gost/core/stats.hpp"
#include "gost/offers/stage.hpp"
#include "gost/v1/admin.grpc.pb.h"
#include "rpc/parse_guard.hpp"

namespace gost::persistence {
class pg_pool;
class shard_placement;
} // namespace gost::persistence

namespace gost {
class call_hub;
class entity_registry;
} // namespace gost

namespace gost::images {
struct image_stats;
}

namespace gost::runtime::rpc {
class type_pool;
}

namespace gost::runtime {
class wake_hub;
}

namespace gost::runtime {

class router;
struct trace_context;

/// gost.v1.AdminService: the inspection console (gostctl offer, history, types, stages, top,
/// nodes, shards, groups, trace) and its safe verbs (pause, resume, passivate, requeue, retry /
/// discard dead letters, drain / undrain, group add), each verb logged with who asked. Who may call
/// which (the verbs need the admin role, or `console.token`) is the caller gate's rule
/// (api/call_gate.hpp). It publishes the node's state types (built once, at construction) and keeps
/// a pool of them to decode states with (`types()`).
class admin_service final : public rpc::guarded<v1::AdminService> {
public:
  struct cluster_view {
    persistence::pg_pool* pool = nullptr;
    std::string node_id;
    std::chrono::milliseconds lease_timeout{};
    /// The cluster manager: applies pauses to this node's shards (pause_atom), drains the node
    /// (drain_node_atom, undrain_atom).
    manager_actor manager;
    /// Wakes another node's shard after a requeue there (may be null: it polls in time).
    std::shared_ptr<wake_hub> wakes;
    /// Which database holds a shard, and each shard group's pool (ADR 0023; null: the
    /// catalog's alone). MoveShards copies between groups; the lists read each.
    std::shared_ptr<const persistence::shard_placement> placement;
    /// The pool of shard group `id`'s database (every declared group has one on a node; null:
    /// none, the group was declared after the node started).
    persistence::pg_pool* group_pool(uint32_t id) const;
    /// Every shard group's pool, group 0's (the catalog's) first: the stages' counts are
    /// summed over them (Top, ListStages), the console's lists merged.
    std::vector<persistence::pg_pool*> group_pools() const;
  };

  /// The types the node publishes (DescribeTypes) and decodes with (OfferHistory).
  struct types_view {
    std::shared_ptr<const entity_registry> entities; ///< the application's actor types; may be null
    bool history = false;                            ///< history.retention is not 0
  };

  admin_service(call_hub& hub, router& r, std::shared_ptr<const stage_registry> stages,
                std::shared_ptr<node_stats> stats, std::chrono::milliseconds timeout,
                cluster_view cluster, api_limits limits, types_view types,
                std::shared_ptr<trace_context> traces = nullptr,
                std::shared_ptr<const images::image_stats> image_figures = nullptr)
    : hub_(hub), router_(r), stages_(std::move(stages)), stats_(std::move(stats)),
      timeout_(timeout), cluster_(std::move(cluster)), limits_(std::move(limits)),
      history_(types.history), entities_(types.entities), traces_(std::move(traces)),
      image_figures_(std::move(image_figures)), moves_(new_move_runs()) {
    publish_types(types.entities.get());
    guard("InspectOffer", &admin_service::InspectOffer);
    guard("InspectEntity", &admin_service::InspectEntity);
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
    guard("ListParkedOutbox", &admin_service::ListParkedOutbox);
    guard("RetryParkedOutbox", &admin_service::RetryParkedOutbox);
    guard("DropParkedOutbox", &admin_service::DropParkedOutbox);
    guard("DrainNode", &admin_service::DrainNode);
    guard("UndrainNode", &admin_service::UndrainNode);
    guard("ListGroups", &admin_service::ListGroups);
    guard("AddGroup", &admin_service::AddGroup);
    guard("MoveShards", &admin_service::MoveShards);
    guard("DescribeTypes", &admin_service::DescribeTypes);
    guard("OfferHistory", &admin_service::OfferHistory);
    guard("Trace", &admin_service::Trace);
    require_all_guarded();
  }

  grpc::ServerUnaryReactor* InspectOffer(grpc::CallbackServerContext* ctx,
                                         const v1::InspectOfferRequest* req,
                                         v1::InspectOfferResponse* resp) override;
  grpc::ServerUnaryReactor* InspectEntity(grpc::CallbackServerContext* ctx,
                                          const v1::InspectEntityRequest* req,
                                          v1::InspectEntityResponse* resp) override;
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
  grpc::ServerUnaryReactor* ListParkedOutbox(grpc::CallbackServerContext* ctx,
                                             const v1::ListParkedOutboxRequest* req,
                                             v1::ListParkedOutboxResponse* resp) override;
  grpc::ServerUnaryReactor* RetryParkedOutbox(grpc::CallbackServerContext* ctx,
                                              const v1::ParkedOutboxVerbRequest* req,
                                              v1::ParkedOutboxVerbResponse* resp) override;
  grpc::ServerUnaryReactor* DropParkedOutbox(grpc::CallbackServerContext* ctx,
                                             const v1::ParkedOutboxVerbRequest* req,
                                             v1::ParkedOutboxVerbResponse* resp) override;
  grpc::ServerWriteReactor<v1::TraceEvent>* Trace(grpc::CallbackServerContext* ctx,
                                                  const v1::TraceRequest* req) override;

  grpc::ServerUnaryReactor* DrainNode(grpc::CallbackServerContext* ctx,
                                      const v1::DrainNodeRequest* req,
                                      v1::DrainNodeResponse* resp) override;
  grpc::ServerUnaryReactor* UndrainNode(grpc::CallbackServerContext* ctx,
                                        const v1::DrainNodeRequest* req,
                                        v1::DrainNodeResponse* resp) override;
  grpc::ServerUnaryReactor* ListGroups(grpc::CallbackServerContext* ctx,
                                       const v1::ListGroupsRequest* req,
                                       v1::ListGroupsResponse* resp) override;
  grpc::ServerUnaryReactor* AddGroup(grpc::CallbackServerContext* ctx,
                                     const v1::AddGroupRequest* req,
                                     v1::AddGroupResponse* resp) override;
  grpc::ServerWriteReactor<v1::MoveShardsProgress>*
  MoveShards(grpc::CallbackServerContext* ctx, const v1::MoveShardsRequest* req) override;
  /// The reads behind the console's RPCs, one function each, called by the RPCs above and by
  /// the web page's JSON endpoints (console/web_api.cpp). Each fills `resp` and then calls
  /// `done` exactly once, maybe on another thread before or after it returns; `resp` must live
  /// until then (hold it in what `done` keeps alive).
  using done_fn = std::function<void(grpc::Status)>;
  void inspect_offer(const v1::InspectOfferRequest& req, v1::InspectOfferResponse* resp,
                     done_fn done);
  /// `budget`: how long the owner may take to be found and to answer (a call's deadline).
  void inspect_entity(const v1::InspectEntityRequest& req, v1::InspectEntityResponse* resp,
                      done_fn done, std::chrono::milliseconds budget);
  void list_stages(v1::ListStagesResponse* resp, done_fn done);
  void list_nodes(v1::ListNodesResponse* resp, done_fn done);
  void list_shards(v1::ListShardsResponse* resp, done_fn done);
  void top(v1::TopResponse* resp, done_fn done);
  void list_dead_letters(const v1::ListDeadLettersRequest& req, v1::ListDeadLettersResponse* resp,
                         done_fn done);

  /// How long a read may take: the node's `api.request_timeout`.
  std::chrono::milliseconds timeout() const { return timeout_; }

  grpc::ServerUnaryReactor* DescribeTypes(grpc::CallbackServerContext* ctx,
                                          const v1::DescribeTypesRequest* req,
                                          v1::DescribeTypesResponse* resp) override;
  grpc::ServerUnaryReactor* OfferHistory(grpc::CallbackServerContext* ctx,
                                         const v1::OfferHistoryRequest* req,
                                         v1::OfferHistoryResponse* resp) override;

  /// The node's own pool of the published types: renders any state it knows as JSON (the web
  /// page's describe view; rpc/proto_types.hpp).
  const rpc::type_pool& types() const noexcept { return *pool_; }

private:
  /// Drain (true) or undrain (false) this node.
  grpc::ServerUnaryReactor* drain_verb(grpc::CallbackServerContext* ctx,
                                       const v1::DrainNodeRequest* req, v1::DrainNodeResponse* resp,
                                       bool drain);
  /// Fills types_ and pool_ from the stages and `entities` (once, at construction).
  void publish_types(const entity_registry* entities);
  /// Pause (true) or resume (false) a stage.
  grpc::ServerUnaryReactor* stage_verb(grpc::CallbackServerContext* ctx,
                                       const v1::StageVerbRequest* req, v1::StageVerbResponse* resp,
                                       bool pause);
  /// Retry (true) or drop (false) parked outbox rows.
  grpc::ServerUnaryReactor* parked_outbox_verb(grpc::CallbackServerContext* ctx,
                                               const v1::ParkedOutboxVerbRequest* req,
                                               v1::ParkedOutboxVerbResponse* resp, bool retry);
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
  api_limits limits_;
  bool history_;
  std::shared_ptr<const entity_registry> entities_; ///< may be null: no actor types
  std::shared_ptr<const v1::DescribeTypesResponse> types_;
  std::shared_ptr<const rpc::type_pool> pool_;
  std::shared_ptr<trace_context> traces_; ///< null: no traces (a node without a cluster part)
  /// The image pools' figures for Top (null: images.enabled is off).
  std::shared_ptr<const images::image_stats> image_figures_;
  /// The moves running here (MoveShards): the service's end waits for them.
  struct move_runs;
  static std::shared_ptr<move_runs> new_move_runs();
  std::shared_ptr<move_runs> moves_;

public:
  ~admin_service() override;

  /// What this node's shard moves did since it started (`gost_shard_move*` on /metrics).
  struct move_figures {
    std::atomic<uint64_t> done{0};    ///< moves finished: the range serves in the target
    std::atomic<uint64_t> failed{0};  ///< moves that stopped on an error (resumed by asking again)
    std::atomic<uint64_t> refused{0}; ///< asked and refused before anything was written
    std::atomic<uint64_t> rows_copied{0};    ///< first pass, every table
    std::atomic<uint64_t> rows_caught_up{0}; ///< copied again (or deleted) from the change log
    std::atomic<uint64_t> queued_moved{0};   ///< outbox batches, parked rows, dead letters
    std::atomic<int64_t> last_fence_ms{-1};  ///< the last finished move's fence; -1: none yet
    std::atomic<int> running{0};
  };
  std::shared_ptr<const move_figures> move_counts() const;
};

} // namespace gost::runtime
