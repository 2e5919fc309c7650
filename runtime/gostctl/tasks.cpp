// gostctl, tasks: one task (TaskService.GetTask, with its actor on the owner node) and a group's
// tasks (TaskService.ListTasks).
#include "gostctl/cli.hpp"

#include <cstdio>
#include <cstdlib>

#include "gost/v1/task_service.grpc.pb.h"
#include "gostctl/print.hpp"

namespace gost::ctl {

namespace {

int tasks_cmd(const cli& c) {
  auto admin = admin_stub(c);
  grpc::ClientContext ctx;
  call_context(ctx, c);
  auto tasks = gost::v1::TaskService::NewStub(channel(c));
  if (c.cmd == "task") {
    if (c.positional.size() != 1) {
      std::fputs("gostctl task: give one task id (<group>:<key>)\n", stderr);
      return 2;
    }
    gost::v1::GetTaskRequest req;
    req.set_task_id(c.positional[0]);
    gost::v1::GetTaskResponse resp;
    auto s = tasks->GetTask(&ctx, req, &resp);
    if (!s.ok())
      return fail(s);
    // Inputs, states and results decode with the node's published types.
    print_decoded(*node_types(*admin, c, {gost::v1::GetTaskResponse::descriptor()}), resp);
    // Its actor on the owner node: what it did lately and waits on.
    auto slash = resp.entity_key().find('/');
    if (slash == std::string::npos)
      return 0;
    gost::v1::InspectEntityRequest ireq;
    ireq.set_kind(resp.entity_key().substr(0, slash));
    ireq.set_id(resp.entity_key().substr(slash + 1));
    gost::v1::InspectEntityResponse ir;
    grpc::ClientContext ictx;
    admin_context(ictx, c);
    auto is = admin->InspectEntity(&ictx, ireq, &ir);
    if (!is.ok())
      return fail(is);
    std::printf("\nentity %s  shard %u  %s (trace it: gostctl trace %s)\n", ir.entity_key().c_str(),
                ir.shard(), residency(ir).c_str(), ir.entity_key().c_str());
    print_activity(ir);
    return 0;
  }
  if (opt(c, "group").empty()) {
    std::fputs("gostctl tasks: give --group G\n", stderr);
    return 2;
  }
  gost::v1::ListTasksRequest req;
  req.set_group_id(opt(c, "group"));
  req.set_state_name(opt(c, "state"));
  req.set_after_id(opt(c, "after"));
  req.set_limit(std::atoi(opt(c, "limit", "100").c_str()));
  gost::v1::ListTasksResponse resp;
  auto s = tasks->ListTasks(&ctx, req, &resp);
  if (!s.ok())
    return fail(s);
  std::printf("%-40s %s\n", "task", "state");
  for (auto& t : resp.tasks())
    std::printf("%-40s %s\n", t.task_id().c_str(), t.state_name().c_str());
  std::printf("%d task(s)%s\n", resp.tasks_size(),
              resp.tasks_size() > 0
                ? (" (next page: --after " + resp.tasks().rbegin()->task_id() + ")").c_str()
                : "");
  return 0;
}

} // namespace

std::vector<command> task_commands() {
  return {
    {"task", "tasks", "ID",
     "a task (TaskService.GetTask): state, pending events, results,\n"
     "inputs and results decoded with the node's published types, and\n"
     "its actor's recent events and what it waits on (as `entity`)",
     tasks_cmd},
    {"tasks", "tasks", "--group G [--state S] [--after ID] [--limit N]",
     "the tasks of a group (in state S), by id", tasks_cmd},
  };
}

} // namespace gost::ctl
