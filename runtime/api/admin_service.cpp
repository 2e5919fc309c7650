#include "api/admin_service.hpp"

#include <map>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <google/protobuf/util/time_util.h>

#include "api/status.hpp"
#include "cluster/router.hpp"
#include "gost/core/call_hub.hpp"
#include "gost/core/shard_hash.hpp"
#include "gost/offers/protocol.hpp"
#include "gost/offers/stage_runner.hpp"
#include "gost/persistence/cluster/leases.hpp"

namespace gost::runtime {

using google::protobuf::util::TimeUtil;

grpc::ServerUnaryReactor* admin_service::InspectOffer(grpc::CallbackServerContext* ctx,
                                                      const v1::InspectOfferRequest* req,
                                                      v1::InspectOfferResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (req->offer_id().empty()) {
    reactor->Finish(invalid("offer_id is required"));
    return reactor;
  }
  auto id = req->offer_id();
  caf::timespan timeout{timeout_};
  auto& r = router_;
  auto store = r.any_store();
  // Residency is the owner's to tell: asked of the local shard, or of the owner node through
  // its link; unknown (mailbox -1, resident false) while the shard has no owner.
  auto owner = r.route_for(id);
  resp->set_shard(r.shard_of(id));
  hub_.run([=](caf::event_based_actor* self) {
    self->request(store, timeout, load_atom_v, id)
      .then(
        [=](offer_snapshot& snap) {
          resp->set_found(snap.found);
          if (snap.found)
            *resp->mutable_offer() = std::move(snap.offer);
          for (auto& st : snap.states) {
            (*resp->mutable_states())[st.stage_id].ParseFromString(st.bytes);
            (*resp->mutable_state_versions())[st.stage_id] = st.version;
          }
          auto now = to_us(stage_clock::now());
          for (auto& e : snap.queued) {
            auto* q = resp->add_queue();
            q->set_stage_id(e.lane);
            *q->mutable_due_at() = TimeUtil::MicrosecondsToTimestamp(e.due_at_us);
            q->set_background(e.prio == persistence::priority::background);
            q->set_timer(e.due_at_us > now);
          }
          resp->set_mailbox(-1);
          auto answer = [=](bool resident, int64_t mailbox) {
            resp->set_resident(resident);
            resp->set_mailbox(mailbox);
            reactor->Finish(grpc::Status::OK);
          };
          if (owner) {
            // Not fatal when the owner cannot say (moving, unreachable): the stored part stands.
            self->request(owner, timeout, resident_atom_v, id).then(answer, [=](caf::error&) {
              reactor->Finish(grpc::Status::OK);
            });
          } else {
            reactor->Finish(grpc::Status::OK); // the shard is moving: no owner to ask
          }
        },
        [=](caf::error& err) { reactor->Finish(to_status(err)); });
  });
  return reactor;
}

grpc::ServerUnaryReactor* admin_service::ListStages(grpc::CallbackServerContext* ctx,
                                                    const v1::ListStagesRequest*,
                                                    v1::ListStagesResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  caf::timespan timeout{timeout_};
  auto store = router_.any_store();
  auto stages = stages_;
  auto stats = stats_;
  hub_.run([=](caf::event_based_actor* self) {
    self->request(store, timeout, count_atom_v, to_us(stage_clock::now()))
      .then(
        [=](stage_count_list& counts) {
          std::map<std::string, v1::StageInfo> by;
          for (auto& e : stages->all()) {
            auto& info = by[e.id];
            info.set_stage_id(e.id);
            info.set_registered(true);
            for (auto& f : e.interests)
              info.add_interests(f);
            info.set_max_parallelism(e.opts.max_parallelism);
            info.set_rate_limit(e.opts.rate_limit);
            info.set_blocking(e.opts.blocking);
            if (auto* m = stats->stage(e.id)) {
              info.set_runs(m->runs.load());
              info.set_failures(m->failures.load());
              info.set_run_p50_ms(m->run.percentile_ms(0.5));
              info.set_run_p99_ms(m->run.percentile_ms(0.99));
              info.set_process_p50_ms(m->process.percentile_ms(0.5));
              info.set_process_p99_ms(m->process.percentile_ms(0.99));
            }
          }
          for (auto& c : counts) {
            auto& info = by[c.stage_id];
            info.set_stage_id(c.stage_id);
            info.set_queued(c.queued);
            info.set_timers(c.timers);
            info.set_dead_letters(c.dead_letters);
          }
          for (auto& [id, info] : by)
            *resp->add_stages() = info;
          resp->set_stage_runs(stats->stage_runs.load());
          resp->set_stage_failures(stats->stage_failures.load());
          resp->set_stage_conflicts(stats->stage_conflicts.load());
          resp->set_change_storms_cut(stats->change_storms_cut.load());
          resp->set_resident_offer_actors(static_cast<uint64_t>(stats->offers.resident.load()));
          resp->set_write_batches(stats->offer_writes.batches.load());
          reactor->Finish(grpc::Status::OK);
        },
        [=](caf::error& err) { reactor->Finish(to_status(err)); });
  });
  return reactor;
}

grpc::ServerUnaryReactor* admin_service::ListNodes(grpc::CallbackServerContext* ctx,
                                                   const v1::ListNodesRequest*,
                                                   v1::ListNodesResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  auto view = cluster_;
  hub_.run_blocking([reactor, resp, view] {
    auto nodes = persistence::list_nodes(*view.pool, view.lease_timeout);
    auto leases = persistence::list_leases(*view.pool, view.lease_timeout);
    if (!nodes || !leases) {
      reactor->Finish(to_status(nodes ? leases.error() : nodes.error()));
      return;
    }
    std::map<std::string, uint32_t> held;
    for (auto& l : *leases)
      if (!l.free)
        ++held[l.owner];
    for (auto& n : *nodes) {
      auto* out = resp->add_nodes();
      out->set_node_id(n.node_id);
      out->set_caf_addr(n.caf_host + ":" + std::to_string(n.caf_port));
      out->set_grpc_addr(n.grpc_addr);
      out->set_http_addr(n.http_addr);
      out->set_alive(n.alive);
      out->set_leaving(n.leaving);
      out->set_heartbeat_age_ms(n.heartbeat_age_ms);
      *out->mutable_started_at() = TimeUtil::MicrosecondsToTimestamp(n.started_at_us);
      out->set_shards(held[n.node_id]);
    }
    resp->set_answered_by(view.node_id);
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* admin_service::ListShards(grpc::CallbackServerContext* ctx,
                                                    const v1::ListShardsRequest*,
                                                    v1::ListShardsResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  auto view = cluster_;
  hub_.run_blocking([reactor, resp, view] {
    auto leases = persistence::list_leases(*view.pool, view.lease_timeout);
    if (!leases) {
      reactor->Finish(to_status(leases.error()));
      return;
    }
    for (auto& l : *leases) {
      auto* out = resp->add_shards();
      out->set_shard(l.shard);
      out->set_owner(l.owner);
      out->set_epoch(l.epoch);
      out->set_free(l.free);
      out->set_heartbeat_age_ms(l.heartbeat_age_ms);
      out->set_handoff_to(l.handoff_to);
    }
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

} // namespace gost::runtime
