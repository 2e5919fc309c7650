// gost.v1.AdminService: the stages (ListStages) and the verbs on stages and offers (pause,
// resume, passivate, requeue).
#include "api/admin_service.hpp"

#include <caf/event_based_actor.hpp>
#include <google/protobuf/util/time_util.h>

#include "api/admin/common.hpp"
#include "api/status.hpp"
#include "cluster/builtin_kinds.hpp"
#include "cluster/manager.hpp"
#include "cluster/router.hpp"
#include "cluster/wakes.hpp"
#include "gost/core/call_hub.hpp"
#include "gost/core/kit/writer.hpp"
#include "gost/core/log.hpp"
#include "gost/offers/protocol.hpp"
#include "gost/persistence/cluster/pauses.hpp"
#include "gost/persistence/offers/write_behind.hpp"

namespace gost::runtime {

using google::protobuf::util::TimeUtil;

namespace {

const auto lg = gost::log::get("console");

} // namespace

using namespace admin;

grpc::ServerUnaryReactor* admin_service::ListStages(grpc::CallbackServerContext* ctx,
                                                    const v1::ListStagesRequest*,
                                                    v1::ListStagesResponse* resp) {
  unary_call call{ctx};
  list_stages(resp, finish(call));
  return call.reactor();
}

void admin_service::list_stages(v1::ListStagesResponse* resp, done_fn done) {
  auto pool = cluster_.pool;
  auto stages = stages_;
  auto stats = stats_;
  hub_.run_blocking([=] {
    auto now = kit::now_us();
    auto table = read_stage_table(*pool, now);
    if (!table) {
      done(to_status(table.error()));
      return;
    }
    for (auto& id : stage_ids(*stages, *table)) {
      auto& info = *resp->add_stages();
      info.set_stage_id(id);
      if (auto* e = stages->find(id)) {
        info.set_registered(true);
        for (auto& f : e->interests)
          info.add_interests(f);
        info.set_max_parallelism(e->opts.max_parallelism);
        info.set_rate_limit(e->opts.rate_limit);
        info.set_blocking(e->opts.blocking);
      }
      if (auto* m = stats->stage(id)) {
        info.set_runs(m->runs.load());
        info.set_failures(m->failures.load());
        info.set_run_p50_ms(m->run.percentile_ms(0.5));
        info.set_run_p99_ms(m->run.percentile_ms(0.99));
        info.set_process_p50_ms(m->process.percentile_ms(0.5));
        info.set_process_p99_ms(m->process.percentile_ms(0.99));
      }
      if (auto c = table->counts.find(id); c != table->counts.end()) {
        info.set_queued(c->second.queued);
        info.set_timers(c->second.timers);
        info.set_dead_letters(c->second.dead_letters);
        info.set_oldest_due_age_ms(age_ms(c->second.oldest_due_us, now));
      }
      if (auto p = table->pauses.find(id); p != table->pauses.end()) {
        info.set_paused(true);
        info.set_paused_by(p->second.paused_by);
        *info.mutable_paused_at() = TimeUtil::MicrosecondsToTimestamp(p->second.paused_at_us);
      }
    }
    resp->set_stage_runs(stats->stage_runs.load());
    resp->set_stage_failures(stats->stage_failures.load());
    resp->set_stage_conflicts(stats->stage_conflicts.load());
    resp->set_change_storms_cut(stats->change_storms_cut.load());
    resp->set_resident_offer_actors(static_cast<uint64_t>(stats->offers.resident.load()));
    resp->set_write_batches(stats->offer_writes.batches.load());
    done(grpc::Status::OK);
  });
}

grpc::ServerUnaryReactor* admin_service::PauseStage(grpc::CallbackServerContext* ctx,
                                                    const v1::StageVerbRequest* req,
                                                    v1::StageVerbResponse* resp) {
  return stage_verb(ctx, req, resp, true);
}

grpc::ServerUnaryReactor* admin_service::ResumeStage(grpc::CallbackServerContext* ctx,
                                                     const v1::StageVerbRequest* req,
                                                     v1::StageVerbResponse* resp) {
  return stage_verb(ctx, req, resp, false);
}

grpc::ServerUnaryReactor* admin_service::stage_verb(grpc::CallbackServerContext* ctx,
                                                    const v1::StageVerbRequest* req,
                                                    v1::StageVerbResponse* resp, bool pause) {
  unary_call call{ctx};
  auto id = req->stage_id();
  // Pausing needs a stage this node knows; a resume also takes a stage no longer registered
  // (a pause left behind by an older version).
  if (auto st = pause        ? registered_stage(*stages_, id)
                : id.empty() ? invalid("stage_id is required")
                             : grpc::Status::OK;
      !st.ok()) {
    call.finish(st);
    return call.reactor();
  }
  auto who = who_asked(ctx, req->who());
  auto pool = cluster_.pool;
  auto manager = cluster_.manager;
  auto node_id = cluster_.node_id;
  auto timeout = timeout_;
  hub_.run_blocking_on_worker([=](caf::event_based_actor* worker) {
    auto changed =
      pause ? persistence::pause_stage(*pool, id, who) : persistence::resume_stage(*pool, id);
    if (!changed) {
      call.finish(changed.error());
      worker->quit();
      return;
    }
    lg->info("stage {} stage={} changed={} by={}", pause ? "paused" : "resumed", id, *changed, who);
    resp->set_changed(*changed);
    resp->set_answered_by(node_id);
    // The manager applies it to this node's shards and answers once no run of a paused stage
    // is in flight here; the other nodes follow the cluster notification.
    worker->request(manager, timeout + std::chrono::seconds{5}, pause_atom_v)
      .then(
        [=](ok_atom) {
          call.ok();
          worker->quit();
        },
        [=](caf::error& err) {
          call.finish(err);
          worker->quit();
        });
  });
  return call.reactor();
}

grpc::ServerUnaryReactor* admin_service::PassivateOffer(grpc::CallbackServerContext* ctx,
                                                        const v1::PassivateOfferRequest* req,
                                                        v1::PassivateOfferResponse* resp) {
  unary_call call{ctx};
  if (req->offer_id().empty()) {
    call.finish(invalid("offer_id is required"));
    return call.reactor();
  }
  auto id = req->offer_id();
  auto shard = router_.shard_of(id);
  resp->set_shard(shard);
  auto local = router_.local(kinds::offers, shard);
  if (!local) {
    call.finish(
      grpc::Status{grpc::StatusCode::FAILED_PRECONDITION,
                   "offer " + id + " is in shard " + std::to_string(shard)
                     + ", which this node does not own; ask its owner (gostctl shards, then "
                       "--addr of that node)"});
    return call.reactor();
  }
  auto who = who_asked(ctx, req->who());
  caf::timespan timeout{timeout_};
  auto target = *local;
  hub_.run([=](caf::event_based_actor* self) {
    self->request(target, timeout, passivate_atom_v, id)
      .then(
        [=](bool was) {
          lg->info("offer passivated offer={} shard={} was_resident={} by={}", id, shard, was, who);
          resp->set_was_resident(was);
          call.ok();
        },
        [=](caf::error& err) { call.finish(err); });
  });
  return call.reactor();
}

grpc::ServerUnaryReactor* admin_service::RequeueOffer(grpc::CallbackServerContext* ctx,
                                                      const v1::RequeueOfferRequest* req,
                                                      v1::RequeueOfferResponse* resp) {
  unary_call call{ctx};
  if (req->offer_id().empty()) {
    call.finish(invalid("offer_id is required"));
    return call.reactor();
  }
  if (auto st = registered_stage(*stages_, req->stage_id()); !st.ok()) {
    call.finish(st);
    return call.reactor();
  }
  auto id = req->offer_id();
  auto stage = req->stage_id();
  auto who = who_asked(ctx, req->who());
  auto shard = router_.shard_of(id);
  resp->set_shard(shard);
  auto pool = cluster_.pool;
  auto* routes = &router_;
  auto wakes = cluster_.wakes;
  hub_.run_blocking([=] {
    auto entry = persistence::requeue_offer(*pool, id, stage, kit::now_us());
    if (!entry) {
      call.finish(entry.error());
      return;
    }
    if (!*entry) {
      call.finish(grpc::Status{grpc::StatusCode::NOT_FOUND, "offer " + id + " does not exist"});
      return;
    }
    lg->info("offer requeued offer={} stage={} shard={} by={}", id, stage, shard, who);
    *resp->mutable_due_at() = TimeUtil::MicrosecondsToTimestamp((*entry)->due_at_us);
    // The owner on this node hears of it now; another node's shard is woken.
    if (auto local = routes->local(kinds::offers, shard))
      caf::anon_send(*local, enqueued_atom_v, persistence::queue_entries{**entry},
                     static_cast<uint8_t>(kit::event_source::console));
    else if (wakes)
      wakes->wake(kinds::offers_name, shard);
    call.ok();
  });
  return call.reactor();
}

} // namespace gost::runtime
