// gost.v1.AdminService: the stages (ListStages) and the verbs on stages and offers (pause,
// resume, passivate, requeue; the last two through the owner of the offer's shard).
#include "api/admin_service.hpp"

#include <caf/event_based_actor.hpp>
#include <google/protobuf/util/time_util.h>

#include "api/admin/common.hpp"
#include "api/status.hpp"
#include "cluster/builtin_kinds.hpp"
#include "cluster/manager.hpp"
#include "cluster/router.hpp"
#include "gost/core/call_hub.hpp"
#include "gost/core/kit/writer.hpp"
#include "gost/core/log.hpp"
#include "gost/offers/protocol.hpp"
#include "gost/persistence/cluster/pauses.hpp"

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
  auto groups = cluster_.group_pools();
  auto stages = stages_;
  auto stats = stats_;
  hub_.run_blocking([=] {
    auto now = kit::now_us();
    auto table = read_stage_table(*pool, groups, now);
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
  unary_call call{ctx, timeout_};
  if (req->offer_id().empty()) {
    call.finish(invalid("offer_id is required"));
    return call.reactor();
  }
  auto id = req->offer_id();
  auto shard = router_.shard_of(id);
  resp->set_shard(shard);
  auto who = who_asked(ctx, req->who());
  auto& r = router_;
  // To the owner of the offer's shard, here or over the node link; while the shard has no
  // owner the call waits for one until its deadline, then answers UNAVAILABLE (retry).
  hub_.run([=, &r](caf::event_based_actor* self) {
    ask_owner(
      self, r, call.deadline(),
      [=](bool was) {
        lg->info("offer passivated offer={} shard={} was_resident={} by={}", id, shard, was, who);
        resp->set_was_resident(was);
        call.ok();
      },
      call.on_error(), passivate_atom_v, id);
  });
  return call.reactor();
}

grpc::ServerUnaryReactor* admin_service::RequeueOffer(grpc::CallbackServerContext* ctx,
                                                      const v1::RequeueOfferRequest* req,
                                                      v1::RequeueOfferResponse* resp) {
  unary_call call{ctx, timeout_};
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
  auto& r = router_;
  // Like every write: the owner's offer actor writes the entry through the write-behind layer,
  // fenced by the shard's lease epoch (a node that lost the lease writes nothing), and its
  // shard schedules the run. A request id is given when the call crosses to another node, so a
  // retry after a timeout queues it once.
  hub_.run([=, &r](caf::event_based_actor* self) {
    ask_owner(
      self, r, call.deadline(),
      [=](int64_t due_us) {
        lg->info("offer requeued offer={} stage={} shard={} by={}", id, stage, shard, who);
        *resp->mutable_due_at() = TimeUtil::MicrosecondsToTimestamp(due_us);
        call.ok();
      },
      call.on_error(), requeue_atom_v, id, stage, request_id{{}, "console", who});
  });
  return call.reactor();
}

} // namespace gost::runtime
