#pragma once
// gost.v1.EntityService: events in, states and outputs out, for the application's actor types
// (gost/entities/entity_type.hpp). Requests for an entity go to the owner of its shard, on
// this node or another (ask_entity_owner); outputs are read from PostgreSQL (committed only).

#include <chrono>
#include <memory>

#include "api/limits.hpp"
#include "gost/v1/entity_service.grpc.pb.h"
#include "rpc/parse_guard.hpp"

namespace gost {
class call_hub;
class entity_registry;
} // namespace gost

namespace gost::persistence {
class shard_placement;
}

namespace gost::runtime {

class router;

/// Checks an entity's kind (registered in `types`) and id. Empty on success, with `key` set to
/// `kind/id`; otherwise the problem, naming the field, and its status code in `code`.
std::string check_entity(const entity_registry& types, const std::string& kind,
                         const std::string& id, std::string& key, grpc::StatusCode& code);

class entity_service final : public rpc::guarded<v1::EntityService> {
public:
  entity_service(call_hub& hub, router& r, std::shared_ptr<const entity_registry> types,
                 std::shared_ptr<const persistence::shard_placement> where,
                 std::chrono::milliseconds timeout, api_limits limits)
    : hub_(hub), router_(r), types_(std::move(types)), where_(std::move(where)), timeout_(timeout),
      limits_(limits) {
    guard("Send", &entity_service::Send);
    guard("Ask", &entity_service::Ask);
    guard("Get", &entity_service::Get);
    guard("PullOutputs", &entity_service::PullOutputs);
    guard("ListTypes", &entity_service::ListTypes);
    require_all_guarded();
  }

  grpc::ServerUnaryReactor* Send(grpc::CallbackServerContext* ctx, const v1::SendEventRequest* req,
                                 v1::SendEventResponse* resp) override;
  grpc::ServerUnaryReactor* Ask(grpc::CallbackServerContext* ctx, const v1::AskEntityRequest* req,
                                v1::AskEntityResponse* resp) override;
  grpc::ServerUnaryReactor* Get(grpc::CallbackServerContext* ctx, const v1::GetEntityRequest* req,
                                v1::GetEntityResponse* resp) override;
  grpc::ServerUnaryReactor* PullOutputs(grpc::CallbackServerContext* ctx,
                                        const v1::PullOutputsRequest* req,
                                        v1::PullOutputsResponse* resp) override;
  grpc::ServerUnaryReactor* ListTypes(grpc::CallbackServerContext* ctx,
                                      const v1::ListTypesRequest* req,
                                      v1::ListTypesResponse* resp) override;

private:
  call_hub& hub_;
  router& router_;
  std::shared_ptr<const entity_registry> types_;
  /// Each group's database: outputs are pulled from all (api/pull_across.hpp).
  std::shared_ptr<const persistence::shard_placement> where_;
  std::chrono::milliseconds timeout_;
  api_limits limits_;
};

} // namespace gost::runtime
