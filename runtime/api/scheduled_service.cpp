#include "api/scheduled_service.hpp"

#include <chrono>

#include "api/call.hpp"
#include "gost/core/call_hub.hpp"
#include "gost/core/log.hpp"
#include "gost/persistence/scheduled/actions.hpp"
#include "gost/scheduled/scheduler.hpp"

namespace gost::runtime {

namespace {

const auto lg = gost::log::get("scheduled");

/// Who asked, for the log: the request's `who`, else the metadata gostctl sends
/// (x-gost-who), and the caller's address.
std::string who_asked(grpc::CallbackServerContext* ctx, const std::string& who) {
  auto w = who;
  if (w.empty()) {
    auto& md = ctx->client_metadata();
    if (auto i = md.find("x-gost-who"); i != md.end())
      w.assign(i->second.data(), i->second.size());
  }
  return (w.empty() ? std::string{"(not given)"} : w) + " peer=" + ctx->peer();
}

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

} // namespace

grpc::ServerUnaryReactor* scheduled_service::Create(grpc::CallbackServerContext* ctx,
                                                    const v1::CreateScheduledActionRequest* req,
                                                    v1::CreateScheduledActionResponse* resp) {
  auto* api = &api_;
  return blocking(hub_, ctx, {}, [=]() -> grpc::Status {
    auto a = api->create(req->id(), req->spec());
    if (!a)
      return to_status(a.error());
    *resp->mutable_action() = std::move(*a);
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* scheduled_service::Update(grpc::CallbackServerContext* ctx,
                                                    const v1::UpdateScheduledActionRequest* req,
                                                    v1::UpdateScheduledActionResponse* resp) {
  auto* api = &api_;
  return blocking(hub_, ctx, {}, [=]() -> grpc::Status {
    auto a = api->update(req->id(), req->spec());
    if (!a)
      return to_status(a.error());
    *resp->mutable_action() = std::move(*a);
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* scheduled_service::Delete(grpc::CallbackServerContext* ctx,
                                                    const v1::DeleteScheduledActionRequest* req,
                                                    v1::DeleteScheduledActionResponse* resp) {
  auto* api = &api_;
  return blocking(hub_, ctx, {}, [=]() -> grpc::Status {
    auto deleted = api->remove(req->id());
    if (!deleted)
      return to_status(deleted.error());
    resp->set_deleted(*deleted);
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* scheduled_service::Get(grpc::CallbackServerContext* ctx,
                                                 const v1::GetScheduledActionRequest* req,
                                                 v1::GetScheduledActionResponse* resp) {
  auto problem = req->id().empty() ? "id: is empty" : std::string{};
  auto* api = &api_;
  return blocking(hub_, ctx, problem, [=]() -> grpc::Status {
    auto* pool = &api->database_of(req->id()); // the action's group's
    auto a = persistence::get_scheduled_action(*pool, req->id());
    if (!a)
      return to_status(a.error());
    if (!*a) {
      return {grpc::StatusCode::NOT_FOUND, "id: no scheduled action '" + req->id() + "'"};
    }
    auto rows = persistence::queue_rows_of(*pool, req->id(), (*a)->meta().guid());
    if (!rows)
      return to_status(rows.error());
    auto attempts = persistence::attempts_of(*pool, req->id(), persistence::attempts_kept);
    if (!attempts)
      return to_status(attempts.error());
    for (auto& r : *attempts) {
      auto* o = resp->add_attempts();
      o->set_at_ms(r.at_ms);
      o->set_occurrence_ms(r.occurrence_ms);
      o->set_attempt(r.attempt);
      o->set_outcome(r.outcome);
      o->set_error(r.error);
      o->set_duration_ms(r.duration_ms.value_or(-1));
      o->set_node(r.node);
      o->set_run_now(r.run_now);
      o->set_shard(r.shard.value_or(-1));
      o->set_epoch(r.epoch.value_or(-1));
    }
    if (!rows->empty()) {
      auto& r = rows->front();
      resp->set_queue(r.processing ? "processing" : "incoming");
      resp->set_queue_shard(r.shard);
      resp->set_queue_due_at_ms(r.scheduled_at_ms.value_or(0));
    }
    *resp->mutable_action() = std::move(**a);
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* scheduled_service::List(grpc::CallbackServerContext* ctx,
                                                  const v1::ListScheduledActionsRequest* req,
                                                  v1::ListScheduledActionsResponse* resp) {
  uint32_t asked = 0;
  auto problem = check_page_size(
    "limit", static_cast<int32_t>(std::min<uint32_t>(req->limit(), 1u << 30)), limits_, asked);
  auto* api = &api_;
  return blocking(hub_, ctx, problem, [=]() -> grpc::Status {
    persistence::scheduled_filter f;
    f.due = req->due();
    f.failing = req->failing();
    f.paused = req->paused();
    f.now_ms = now_ms();
    auto page = api->list(req->after_id(), asked, f); // every group's, merged by id
    if (!page)
      return to_status(page.error());
    if (page->size() == asked && !page->empty())
      resp->set_next_after_id(page->back().meta().id());
    for (auto& a : *page)
      *resp->add_actions() = std::move(a);
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* scheduled_service::Pause(grpc::CallbackServerContext* ctx,
                                                   const v1::ScheduledActionVerbRequest* req,
                                                   v1::ScheduledActionVerbResponse* resp) {
  return verb(ctx, req, resp, static_cast<int>(scheduled::scheduler::verb::pause));
}

grpc::ServerUnaryReactor* scheduled_service::Resume(grpc::CallbackServerContext* ctx,
                                                    const v1::ScheduledActionVerbRequest* req,
                                                    v1::ScheduledActionVerbResponse* resp) {
  return verb(ctx, req, resp, static_cast<int>(scheduled::scheduler::verb::resume));
}

grpc::ServerUnaryReactor* scheduled_service::RunNow(grpc::CallbackServerContext* ctx,
                                                    const v1::ScheduledActionVerbRequest* req,
                                                    v1::ScheduledActionVerbResponse* resp) {
  return verb(ctx, req, resp, static_cast<int>(scheduled::scheduler::verb::run_now));
}

grpc::ServerUnaryReactor* scheduled_service::verb(grpc::CallbackServerContext* ctx,
                                                  const v1::ScheduledActionVerbRequest* req,
                                                  v1::ScheduledActionVerbResponse* resp,
                                                  int which) {
  auto problem = req->id().empty() ? "id: is empty" : std::string{};
  auto v = static_cast<scheduled::scheduler::verb>(which);
  const char* name = v == scheduled::scheduler::verb::pause    ? "paused"
                     : v == scheduled::scheduler::verb::resume ? "resumed"
                                                               : "run now";
  auto who = who_asked(ctx, req->who());
  auto* api = &api_;
  return blocking(hub_, ctx, problem, [=]() -> grpc::Status {
    auto r = api->apply(v, req->id(), who);
    if (!r) {
      lg->info("scheduled action {} refused id={} by={} error={}", name, req->id(), who,
               persistence::error_message(r.error()));
      return to_status(r.error());
    }
    lg->info("scheduled action {} id={} changed={} guid={} by={}", name, req->id(), r->changed,
             r->action.meta().guid(), who);
    resp->set_changed(r->changed);
    *resp->mutable_action() = std::move(r->action);
    return grpc::Status::OK;
  });
}

} // namespace gost::runtime
