#pragma once
// gost.v1.TaskService (docs/tasks.md): task groups, tasks and their results, for the task types
// a node hosts (gost/tasks/task_type.hpp). A task is a durable entity (`task.<type>/<id>`, lane =
// its group): events go to the owner of its shard like EntityService's, groups and results are
// read from PostgreSQL (committed only). Groups never change once created, so the service
// keeps those it has seen.

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "api/call.hpp"
#include "api/limits.hpp"
#include "gost/persistence/tasks/tasks.hpp"
#include "gost/v1/task_service.grpc.pb.h"
#include "gost/v1/tasks.pb.h"
#include "rpc/parse_guard.hpp"

namespace gost {
class call_hub;
class entity_registry;
} // namespace gost

namespace gost::tasks {
class task_entity_base;
}

namespace gost::persistence {
class pg_pool;
class shard_placement;
} // namespace gost::persistence

namespace gost::runtime {

class router;

class task_service final : public rpc::guarded<v1::TaskService> {
public:
  /// What a group gets when CreateGroup leaves a setting out (`tasks.*`).
  struct group_defaults {
    std::chrono::milliseconds retry_delay{std::chrono::minutes{10}};
    int32_t max_attempts = 5;
  };

  task_service(call_hub& hub, router& r, std::shared_ptr<const entity_registry> types,
               persistence::pg_pool& pool,
               std::shared_ptr<const persistence::shard_placement> where,
               std::chrono::milliseconds timeout, api_limits limits, group_defaults defaults)
    : hub_(hub), router_(r), types_(std::move(types)), pool_(pool), where_(std::move(where)),
      timeout_(timeout), limits_(limits), defaults_(defaults) {
    guard("CreateGroup", &task_service::CreateGroup);
    guard("CreateTask", &task_service::CreateTask);
    guard("SendEvent", &task_service::SendEvent);
    guard("Cancel", &task_service::Cancel);
    guard("Reprioritize", &task_service::Reprioritize);
    guard("GetTask", &task_service::GetTask);
    guard("PullResults", &task_service::PullResults);
    guard("ListTasks", &task_service::ListTasks);
    require_all_guarded();
  }

  grpc::ServerUnaryReactor* CreateGroup(grpc::CallbackServerContext* ctx,
                                        const v1::CreateGroupRequest* req,
                                        v1::CreateGroupResponse* resp) override;
  grpc::ServerUnaryReactor* CreateTask(grpc::CallbackServerContext* ctx,
                                       const v1::CreateTaskRequest* req,
                                       v1::CreateTaskResponse* resp) override;
  grpc::ServerUnaryReactor* SendEvent(grpc::CallbackServerContext* ctx,
                                      const v1::SendTaskEventRequest* req,
                                      v1::SendTaskEventResponse* resp) override;
  grpc::ServerUnaryReactor* Cancel(grpc::CallbackServerContext* ctx,
                                   const v1::CancelTaskRequest* req,
                                   v1::CancelTaskResponse* resp) override;
  grpc::ServerUnaryReactor* Reprioritize(grpc::CallbackServerContext* ctx,
                                         const v1::ReprioritizeTaskRequest* req,
                                         v1::ReprioritizeTaskResponse* resp) override;
  grpc::ServerUnaryReactor* GetTask(grpc::CallbackServerContext* ctx, const v1::GetTaskRequest* req,
                                    v1::GetTaskResponse* resp) override;
  grpc::ServerUnaryReactor* PullResults(grpc::CallbackServerContext* ctx,
                                        const v1::PullResultsRequest* req,
                                        v1::PullResultsResponse* resp) override;
  grpc::ServerUnaryReactor* ListTasks(grpc::CallbackServerContext* ctx,
                                      const v1::ListTasksRequest* req,
                                      v1::ListTasksResponse* resp) override;

private:
  using group_fn = std::function<void(const persistence::task_group&)>;

  /// The task type hosted under `name`, or null.
  const tasks::task_entity_base* task_type(const std::string& name) const;
  /// Calls `fn` with group `group_id` (on some thread), or finishes `call` with NOT_FOUND
  /// (or the database's error).
  void with_group(unary_call call, const std::string& group_id, group_fn fn);
  /// Stores `event` for an existing task, finishing `call` (NOT_FOUND when there is no
  /// such task, nothing stored).
  void send_to_task(unary_call call, const std::string& task_id, const v1::TaskEvent& event,
                    const std::string& request_id, int64_t delay_ms);
  std::optional<persistence::task_group> cached(const std::string& group_id);
  void remember(const persistence::task_group& g);

  call_hub& hub_;
  router& router_;
  std::shared_ptr<const entity_registry> types_;
  persistence::pg_pool& pool_; ///< the catalog database: task groups
  /// Each group's database: tasks live in their shard's group (results pulled, lists merged).
  std::shared_ptr<const persistence::shard_placement> where_;
  std::chrono::milliseconds timeout_;
  api_limits limits_;
  group_defaults defaults_;
  std::mutex groups_mtx_;
  std::map<std::string, persistence::task_group> groups_; ///< seen: groups never change
};

} // namespace gost::runtime
