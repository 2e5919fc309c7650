#include "api/task_service.hpp"

#include <google/protobuf/util/time_util.h>

#include <caf/event_based_actor.hpp>

#include "api/pull_across.hpp"
#include "api/status.hpp"
#include "cluster/builtin_kinds.hpp"
#include "cluster/router.hpp"
#include "gost/core/call_hub.hpp"
#include "gost/entities/entity_type.hpp"
#include "gost/persistence/cluster/placement.hpp"
#include "gost/persistence/entities/entities.hpp"
#include "gost/persistence/random_id.hpp"
#include "gost/tasks/task_type.hpp"

namespace gost::runtime {

namespace {

using google::protobuf::util::TimeUtil;

constexpr int32_t max_attempts_limit = 100;
constexpr size_t max_key_len = 128;
constexpr size_t max_name_len = 128;

/// The kinds of task this node hosts, for messages: "moderation, ...".
std::string hosted_types(const entity_registry& types) {
  std::string out;
  for (auto& t : types.all())
    if (auto name = tasks::task_type_of_kind(t->kind())) {
      if (!out.empty())
        out += ", ";
      out += *name;
    }
  return out.empty() ? "none" : out;
}

/// A delay as asked: the problem, or "" with `ms` set.
std::string check_delay(const v1::SendTaskEventRequest& req, int64_t& ms) {
  ms = req.has_delay() ? TimeUtil::DurationToMilliseconds(req.delay()) : 0;
  return ms < 0 ? "delay must not be negative" : "";
}

bool same_settings(const persistence::task_group& a, const persistence::task_group& b) {
  return a.task_type == b.task_type && a.source == b.source && a.retry_delay_ms == b.retry_delay_ms
         && a.max_attempts == b.max_attempts;
}

void to_proto(const persistence::task_group& g, v1::TaskGroup& out) {
  out.set_group_id(g.group_id);
  out.set_task_type(g.task_type);
  out.set_source(g.source);
  *out.mutable_retry_delay() = TimeUtil::MillisecondsToDuration(g.retry_delay_ms);
  out.set_max_attempts(g.max_attempts);
}

} // namespace

const tasks::task_entity_base* task_service::task_type(const std::string& name) const {
  return dynamic_cast<const tasks::task_entity_base*>(types_->find(tasks::task_kind(name)));
}

std::optional<persistence::task_group> task_service::cached(const std::string& group_id) {
  std::lock_guard<std::mutex> guard{groups_mtx_};
  auto i = groups_.find(group_id);
  if (i == groups_.end())
    return std::nullopt;
  return i->second;
}

void task_service::remember(const persistence::task_group& g) {
  std::lock_guard<std::mutex> guard{groups_mtx_};
  groups_.emplace(g.group_id, g);
}

void task_service::with_group(unary_call call, const std::string& group_id, group_fn fn) {
  if (auto problem = tasks::check_group_id(group_id); !problem.empty()) {
    call.finish(invalid("group_id " + problem));
    return;
  }
  if (auto g = cached(group_id)) {
    fn(*g);
    return;
  }
  auto* pool = &pool_;
  hub_.run_blocking([=] {
    auto g = persistence::find_task_group(*pool, group_id);
    if (!g) {
      call.finish(g.error());
    } else if (!*g) {
      call.finish(
        grpc::Status{grpc::StatusCode::NOT_FOUND,
                     "group_id: group `" + group_id + "` does not exist (CreateGroup creates it)"});
    } else {
      remember(**g);
      fn(**g);
    }
  });
}

void task_service::send_to_task(unary_call call, const std::string& task_id,
                                const v1::TaskEvent& event, const std::string& request_id,
                                int64_t delay_ms) {
  auto group = tasks::group_of_task(task_id);
  if (!group) {
    call.finish(invalid("task_id: `" + task_id + "` is not a task id (<group>:<key>)"));
    return;
  }
  if (task_id.size() > max_id_len) {
    call.finish(invalid("task_id must be at most 256 bytes"));
    return;
  }
  if (request_id.size() > max_id_len) {
    call.finish(invalid("request_id must be at most 256 bytes"));
    return;
  }
  auto deadline = call.deadline();
  // The size is checked by the caller, on the field the client filled (SendEvent's payload,
  // Cancel's reason): the packed event adds the name and a few bytes of framing to it.
  any_msg packed;
  packed.value.PackFrom(event);
  with_group(call, *group, [=](const persistence::task_group& g) {
    auto key = persistence::entity_key(tasks::task_kind(g.task_type), task_id);
    auto& r = router_;
    hub_.run([=, &r](caf::event_based_actor* self) {
      auto fail = call.on_error();
      // Only to a task that exists: an event to no task would wait for an Init forever.
      ask_entity_owner(
        self, r, deadline,
        [=, &r](entity_view& v) {
          if (!v.exists) {
            call.finish(grpc::Status{grpc::StatusCode::NOT_FOUND,
                                     "task_id: no task `" + task_id + "` (CreateTask creates it)"});
            return;
          }
          ask_entity_owner(
            self, r, deadline, [=](ok_atom) { call.ok(); }, fail, send_atom_v, key, packed,
            request_id, delay_ms);
        },
        fail, view_atom_v, key);
    });
  });
}

grpc::ServerUnaryReactor* task_service::CreateGroup(grpc::CallbackServerContext* ctx,
                                                    const v1::CreateGroupRequest* req,
                                                    v1::CreateGroupResponse* resp) {
  unary_call call{ctx, timeout_};
  auto& in = req->group();
  if (auto problem = tasks::check_group_id(in.group_id()); !problem.empty()) {
    call.finish(invalid("group.group_id " + problem));
    return call.reactor();
  }
  if (task_type(in.task_type()) == nullptr) {
    call.finish(invalid("group.task_type: `" + in.task_type()
                        + "` is not a task type of this node (hosted: " + hosted_types(*types_)
                        + ")"));
    return call.reactor();
  }
  if (in.source().empty() || in.source().size() > max_id_len) {
    call.finish(invalid("group.source (the system sending the tasks) must be 1..256 bytes"));
    return call.reactor();
  }
  persistence::task_group g;
  g.group_id = in.group_id();
  g.task_type = in.task_type();
  g.source = in.source();
  g.retry_delay_ms = in.has_retry_delay() ? TimeUtil::DurationToMilliseconds(in.retry_delay())
                                          : defaults_.retry_delay.count();
  if (g.retry_delay_ms < 0) {
    call.finish(invalid("group.retry_delay must not be negative"));
    return call.reactor();
  }
  g.max_attempts = in.max_attempts() == 0 ? defaults_.max_attempts : in.max_attempts();
  if (g.max_attempts < 1 || g.max_attempts > max_attempts_limit) {
    call.finish(invalid("group.max_attempts must be 1..100 (0: tasks.max_attempts)"));
    return call.reactor();
  }
  auto* pool = &pool_;
  hub_.run_blocking([=] {
    auto stored = persistence::create_task_group(*pool, g);
    if (!stored) {
      call.finish(stored.error());
      return;
    }
    if (!same_settings(*stored, g)) {
      call.finish(grpc::Status{grpc::StatusCode::ALREADY_EXISTS,
                               "group.group_id: group `" + g.group_id
                                 + "` exists with other settings (task_type " + stored->task_type
                                 + ", source " + stored->source + "); choose another id"});
      return;
    }
    remember(*stored);
    to_proto(*stored, *resp->mutable_group());
    call.ok();
  });
  return call.reactor();
}

grpc::ServerUnaryReactor* task_service::CreateTask(grpc::CallbackServerContext* ctx,
                                                   const v1::CreateTaskRequest* req,
                                                   v1::CreateTaskResponse* resp) {
  unary_call call{ctx, timeout_};
  if (req->client_key().size() > max_key_len) {
    call.finish(invalid("client_key must be at most 128 bytes"));
    return call.reactor();
  }
  if (!req->has_input() || req->input().type_url().empty()) {
    call.finish(invalid("input is required: a google.protobuf.Any of the task type's input"));
    return call.reactor();
  }
  if (auto problem = check_event_size("input", req->input().ByteSizeLong(), limits_);
      !problem.empty()) {
    call.finish(invalid(problem));
    return call.reactor();
  }
  auto deadline = call.deadline();
  auto request = *req;
  with_group(call, req->group_id(), [=](const persistence::task_group& g) {
    auto* type = task_type(g.task_type);
    if (type == nullptr) {
      call.finish(invalid("group_id: the task type `" + g.task_type + "` of group `" + g.group_id
                          + "` is not hosted by this node (hosted: " + hosted_types(*types_)
                          + ")"));
      return;
    }
    auto* want = type->type().input_descriptor();
    if (!tasks::is_a(request.input(), want)) {
      call.finish(invalid("input: a " + g.task_type + " task takes a " + want->full_name()
                          + ", not " + request.input().type_url()));
      return;
    }
    auto id = tasks::task_id(g.group_id, request.client_key().empty() ? persistence::random_id()
                                                                      : request.client_key());
    v1::TaskEvent init;
    auto* i = init.mutable_init();
    i->set_group(g.group_id);
    *i->mutable_input() = request.input();
    i->set_priority(request.priority());
    i->set_retry_delay_ms(g.retry_delay_ms);
    i->set_max_attempts(g.max_attempts);
    any_msg packed;
    packed.value.PackFrom(init);
    auto key = persistence::entity_key(type->kind(), id);
    auto& r = router_;
    hub_.run([=, &r](caf::event_based_actor* self) {
      // One Init per task id: a retry of the same client key stores nothing twice.
      ask_entity_owner(
        self, r, deadline,
        [=](ok_atom) {
          resp->set_task_id(id);
          call.ok();
        },
        call.on_error(), send_atom_v, key, packed, std::string{"init"}, int64_t{0});
    });
  });
  return call.reactor();
}

grpc::ServerUnaryReactor* task_service::SendEvent(grpc::CallbackServerContext* ctx,
                                                  const v1::SendTaskEventRequest* req,
                                                  v1::SendTaskEventResponse*) {
  unary_call call{ctx, timeout_};
  if (req->name().empty() || req->name().size() > max_name_len) {
    call.finish(invalid("name (the task type's event name, e.g. `verdict`) must be 1..128 "
                        "bytes"));
    return call.reactor();
  }
  int64_t delay_ms = 0;
  if (auto problem = check_delay(*req, delay_ms); !problem.empty()) {
    call.finish(invalid(problem));
    return call.reactor();
  }
  if (auto problem = check_event_size("payload", req->payload().ByteSizeLong(), limits_);
      !problem.empty()) {
    call.finish(invalid(problem));
    return call.reactor();
  }
  v1::TaskEvent e;
  e.mutable_custom()->set_name(req->name());
  *e.mutable_custom()->mutable_payload() = req->payload();
  send_to_task(call, req->task_id(), e, req->request_id(), delay_ms);
  return call.reactor();
}

grpc::ServerUnaryReactor* task_service::Cancel(grpc::CallbackServerContext* ctx,
                                               const v1::CancelTaskRequest* req,
                                               v1::CancelTaskResponse*) {
  unary_call call{ctx, timeout_};
  if (auto problem = check_event_size("reason", req->reason().size(), limits_); !problem.empty()) {
    call.finish(invalid(problem));
    return call.reactor();
  }
  v1::TaskEvent e;
  e.mutable_cancel()->set_reason(req->reason());
  send_to_task(call, req->task_id(), e, req->request_id(), 0);
  return call.reactor();
}

grpc::ServerUnaryReactor* task_service::Reprioritize(grpc::CallbackServerContext* ctx,
                                                     const v1::ReprioritizeTaskRequest* req,
                                                     v1::ReprioritizeTaskResponse*) {
  unary_call call{ctx, timeout_};
  v1::TaskEvent e;
  e.mutable_reprioritize()->set_priority(req->priority());
  send_to_task(call, req->task_id(), e, req->request_id(), 0);
  return call.reactor();
}

grpc::ServerUnaryReactor* task_service::GetTask(grpc::CallbackServerContext* ctx,
                                                const v1::GetTaskRequest* req,
                                                v1::GetTaskResponse* resp) {
  unary_call call{ctx, timeout_};
  auto id = req->task_id();
  auto group = tasks::group_of_task(id);
  if (!group || id.size() > max_id_len) {
    call.finish(invalid("task_id: `" + id + "` is not a task id (<group>:<key>)"));
    return call.reactor();
  }
  auto deadline = call.deadline();
  with_group(call, *group, [=](const persistence::task_group& g) {
    auto key = persistence::entity_key(tasks::task_kind(g.task_type), id);
    auto& r = router_;
    hub_.run([=, &r](caf::event_based_actor* self) {
      ask_entity_owner(
        self, r, deadline,
        [=](entity_view& v) {
          if (!v.exists) {
            call.finish(grpc::Status{grpc::StatusCode::NOT_FOUND, "task_id: no task `" + id + "`"});
            return;
          }
          resp->set_task_id(id);
          resp->set_group_id(g.group_id);
          resp->set_task_type(g.task_type);
          resp->set_exists(true);
          resp->set_version(v.version);
          resp->set_entity_key(key);
          resp->set_pending_events(v.pending);
          if (v.next_due_us > 0)
            *resp->mutable_next_due() = TimeUtil::MicrosecondsToTimestamp(v.next_due_us);
          v1::Task t;
          if (v.state && v.state->UnpackTo(&t)) {
            resp->set_state(t.state());
            resp->set_state_name(t.state_name());
            resp->set_closed(t.closed());
            resp->set_priority(t.priority());
            *resp->mutable_input() = t.input();
            *resp->mutable_data() = t.data();
            resp->set_results(t.results());
          }
          call.ok();
        },
        call.on_error(), view_atom_v, key);
    });
  });
  return call.reactor();
}

grpc::ServerUnaryReactor* task_service::PullResults(grpc::CallbackServerContext* ctx,
                                                    const v1::PullResultsRequest* req,
                                                    v1::PullResultsResponse* resp) {
  unary_call call{ctx, timeout_};
  uint32_t asked = 0;
  if (auto problem = check_page_size("limit", req->limit(), limits_, asked); !problem.empty()) {
    call.finish(invalid(problem));
    return call.reactor();
  }
  pull_start_point start;
  if (auto problem = pull_start(req->after(), req->after_token(), start); !problem.empty()) {
    call.finish(invalid(problem));
    return call.reactor();
  }
  auto where = where_;
  with_group(call, req->group_id(), [=](const persistence::task_group& g) {
    // Blocking reads (bounded by `limit` per group): off the scheduler threads.
    hub_.run_blocking([=] {
      auto page = pull_outputs(*where, tasks::task_kind(g.task_type), g.group_id, start, asked);
      if (!page) {
        call.finish(page.error());
        return;
      }
      for (auto& o : page->rows) {
        google::protobuf::Any any;
        v1::TaskResult r;
        auto* out = resp->add_results();
        out->set_seq(o.seq);
        out->set_task_id(o.entity_id);
        if (any.ParseFromString(o.payload) && any.UnpackTo(&r)) {
          out->set_name(r.name());
          *out->mutable_payload() = r.payload();
        }
      }
      put_position(*page, *resp);
      call.ok();
    });
  });
  return call.reactor();
}

grpc::ServerUnaryReactor* task_service::ListTasks(grpc::CallbackServerContext* ctx,
                                                  const v1::ListTasksRequest* req,
                                                  v1::ListTasksResponse* resp) {
  unary_call call{ctx, timeout_};
  uint32_t asked = 0;
  if (auto problem = check_page_size("limit", req->limit(), limits_, asked); !problem.empty()) {
    call.finish(invalid(problem));
    return call.reactor();
  }
  auto state = req->state_name();
  auto after = req->after_id();
  auto where = where_;
  with_group(call, req->group_id(), [=](const persistence::task_group& g) {
    hub_.run_blocking([=] {
      // Every group's page, merged by id (byte order).
      auto ids = persistence::merged_page<persistence::tagged_entity>(
        *where, asked,
        [&](persistence::pg_pool& db) {
          return persistence::list_tagged_entities(db, tasks::task_kind(g.task_type), g.group_id,
                                                   state, after, asked);
        },
        [](const auto& x, const auto& y) { return x.id < y.id; });
      if (!ids) {
        call.finish(ids.error());
        return;
      }
      for (auto& t : *ids) {
        auto* out = resp->add_tasks();
        out->set_task_id(t.id);
        out->set_state_name(t.tag);
      }
      call.ok();
    });
  });
  return call.reactor();
}

} // namespace gost::runtime
