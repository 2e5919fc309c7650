#pragma once
// gost.v1.ScheduledActionService (docs/scheduled-actions.md, seed 001): Create / Update /
// Delete / Get / List of scheduled actions, and the operator's verbs Pause / Resume / RunNow
// (each logged with who asked). A thin shell over the seed's scheduler
// (gost/scheduled/scheduler.hpp): each change is checked (INVALID_ARGUMENT naming the field,
// nothing stored), gets a new guid and one incoming row of a random shard, in one transaction.
// The database work runs on the call hub's blocking workers, never on gRPC's threads.

#include <memory>

#include "api/limits.hpp"
#include "gost/v1/scheduled_actions.grpc.pb.h"
#include "rpc/parse_guard.hpp"

namespace gost {
class call_hub;
}

namespace gost::scheduled {
class scheduler;
}

namespace gost::runtime {

class scheduled_service final : public rpc::guarded<v1::ScheduledActionService> {
public:
  /// `api` knows which database holds an action (its id's home shard's group) and reads the
  /// lists of every group.
  scheduled_service(call_hub& hub, scheduled::scheduler& api, api_limits limits)
    : hub_(hub), api_(api), limits_(limits) {
    guard("Create", &scheduled_service::Create);
    guard("Update", &scheduled_service::Update);
    guard("Delete", &scheduled_service::Delete);
    guard("Get", &scheduled_service::Get);
    guard("List", &scheduled_service::List);
    guard("Pause", &scheduled_service::Pause);
    guard("Resume", &scheduled_service::Resume);
    guard("RunNow", &scheduled_service::RunNow);
    require_all_guarded();
  }

  grpc::ServerUnaryReactor* Create(grpc::CallbackServerContext* ctx,
                                   const v1::CreateScheduledActionRequest* req,
                                   v1::CreateScheduledActionResponse* resp) override;
  grpc::ServerUnaryReactor* Update(grpc::CallbackServerContext* ctx,
                                   const v1::UpdateScheduledActionRequest* req,
                                   v1::UpdateScheduledActionResponse* resp) override;
  grpc::ServerUnaryReactor* Delete(grpc::CallbackServerContext* ctx,
                                   const v1::DeleteScheduledActionRequest* req,
                                   v1::DeleteScheduledActionResponse* resp) override;
  grpc::ServerUnaryReactor* Get(grpc::CallbackServerContext* ctx,
                                const v1::GetScheduledActionRequest* req,
                                v1::GetScheduledActionResponse* resp) override;
  grpc::ServerUnaryReactor* List(grpc::CallbackServerContext* ctx,
                                 const v1::ListScheduledActionsRequest* req,
                                 v1::ListScheduledActionsResponse* resp) override;

  grpc::ServerUnaryReactor* Pause(grpc::CallbackServerContext* ctx,
                                  const v1::ScheduledActionVerbRequest* req,
                                  v1::ScheduledActionVerbResponse* resp) override;
  grpc::ServerUnaryReactor* Resume(grpc::CallbackServerContext* ctx,
                                   const v1::ScheduledActionVerbRequest* req,
                                   v1::ScheduledActionVerbResponse* resp) override;
  grpc::ServerUnaryReactor* RunNow(grpc::CallbackServerContext* ctx,
                                   const v1::ScheduledActionVerbRequest* req,
                                   v1::ScheduledActionVerbResponse* resp) override;

private:
  /// Pause, Resume and RunNow: the scheduler's verb, logged with who asked.
  grpc::ServerUnaryReactor* verb(grpc::CallbackServerContext* ctx,
                                 const v1::ScheduledActionVerbRequest* req,
                                 v1::ScheduledActionVerbResponse* resp, int which);

  call_hub& hub_;
  scheduled::scheduler& api_;
  api_limits limits_;
};

} // namespace gost::runtime
