#include "api/scheduled_service.hpp"

#include <chrono>

#include "api/status.hpp"
#include "gost/core/call_hub.hpp"
#include "gost/persistence/scheduled/actions.hpp"
#include "gost/scheduled/scheduler.hpp"

namespace gost::runtime {

namespace {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

} // namespace

grpc::ServerUnaryReactor* scheduled_service::Create(grpc::CallbackServerContext* ctx,
                                                    const v1::CreateScheduledActionRequest* req,
                                                    v1::CreateScheduledActionResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  auto* api = &api_;
  hub_.run_blocking([=] {
    auto a = api->create(req->id(), req->spec());
    if (!a) {
      reactor->Finish(to_status(a.error()));
      return;
    }
    *resp->mutable_action() = std::move(*a);
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* scheduled_service::Update(grpc::CallbackServerContext* ctx,
                                                    const v1::UpdateScheduledActionRequest* req,
                                                    v1::UpdateScheduledActionResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  auto* api = &api_;
  hub_.run_blocking([=] {
    auto a = api->update(req->id(), req->spec());
    if (!a) {
      reactor->Finish(to_status(a.error()));
      return;
    }
    *resp->mutable_action() = std::move(*a);
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* scheduled_service::Delete(grpc::CallbackServerContext* ctx,
                                                    const v1::DeleteScheduledActionRequest* req,
                                                    v1::DeleteScheduledActionResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  auto* api = &api_;
  hub_.run_blocking([=] {
    auto deleted = api->remove(req->id());
    if (!deleted) {
      reactor->Finish(to_status(deleted.error()));
      return;
    }
    resp->set_deleted(*deleted);
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* scheduled_service::Get(grpc::CallbackServerContext* ctx,
                                                 const v1::GetScheduledActionRequest* req,
                                                 v1::GetScheduledActionResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (req->id().empty()) {
    reactor->Finish(invalid("id: is empty"));
    return reactor;
  }
  auto* pool = &pool_;
  hub_.run_blocking([=] {
    auto a = persistence::get_scheduled_action(*pool, req->id());
    if (!a) {
      reactor->Finish(to_status(a.error()));
      return;
    }
    if (!*a) {
      reactor->Finish({grpc::StatusCode::NOT_FOUND, "id: no scheduled action '" + req->id() + "'"});
      return;
    }
    auto rows = persistence::queue_rows_of(*pool, req->id(), (*a)->meta().guid());
    if (!rows) {
      reactor->Finish(to_status(rows.error()));
      return;
    }
    if (!rows->empty()) {
      auto& r = rows->front();
      resp->set_queue(r.processing ? "processing" : "incoming");
      resp->set_queue_shard(r.shard);
      resp->set_queue_due_at_ms(r.scheduled_at_ms.value_or(0));
    }
    *resp->mutable_action() = std::move(**a);
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* scheduled_service::List(grpc::CallbackServerContext* ctx,
                                                  const v1::ListScheduledActionsRequest* req,
                                                  v1::ListScheduledActionsResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  uint32_t asked = 0;
  if (auto problem = check_page_size(
        "limit", static_cast<int32_t>(std::min<uint32_t>(req->limit(), 1u << 30)), limits_, asked);
      !problem.empty()) {
    reactor->Finish(invalid(problem));
    return reactor;
  }
  auto* pool = &pool_;
  hub_.run_blocking([=] {
    persistence::scheduled_filter f;
    f.due = req->due();
    f.failing = req->failing();
    f.now_ms = now_ms();
    auto page = persistence::list_scheduled_actions(*pool, req->after_id(), asked, f);
    if (!page) {
      reactor->Finish(to_status(page.error()));
      return;
    }
    if (page->size() == asked && !page->empty())
      resp->set_next_after_id(page->back().meta().id());
    for (auto& a : *page)
      *resp->add_actions() = std::move(a);
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

} // namespace gost::runtime
