#include "api/admin_service.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <set>
#include <tuple>
#include <type_traits>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <google/protobuf/util/time_util.h>

#include "gost/v1/events.pb.h"

#include "api/entity_service.hpp" // check_entity
#include "api/entity_view.hpp"
#include "api/status.hpp"
#include "cluster/ask_owner.hpp"
#include "cluster/manager.hpp"
#include "cluster/router.hpp"
#include "cluster/trace_stream.hpp"
#include "gost/core/call_hub.hpp"
#include "gost/core/entity/entity_type.hpp"
#include "gost/core/kit/writer.hpp"
#include "gost/core/log.hpp"
#include "gost/core/shard_hash.hpp"
#include "gost/images/stats.hpp"
#include "gost/offers/content_rules.hpp" // max_id_len
#include "gost/offers/protocol.hpp"
#include "gost/offers/stage_runner.hpp"
#include "gost/persistence/cluster/leases.hpp"
#include "gost/persistence/cluster/pauses.hpp"
#include "gost/persistence/offers/dead_letters.hpp"
#include "gost/persistence/offers/history.hpp"
#include "gost/persistence/offers/write_behind.hpp"
#include "rpc/proto_types.hpp"
#include "rpc/trace_view.hpp"

namespace gost::runtime {

using google::protobuf::util::TimeUtil;

namespace {

/// What the owner told of an actor (kit::activity) into an inspection's response (offer's or
/// entity's: the same fields). `node_id`: this node, when the local shard answered.
template <class Response>
void put_activity(const kit::activity& a, const std::string& id, uint32_t shard,
                  const std::string& node_id, Response& resp) {
  resp.set_resident(a.resident);
  resp.set_mailbox(a.mailbox);
  auto node = a.node.empty() ? node_id : a.node;
  for (auto& e : a.recent)
    to_proto(e, id, shard, node, *resp.add_recent());
  if (a.in_event)
    to_proto(a.current, id, shard, node, *resp.mutable_current());
  resp.set_waiting(kit::to_string(a.waiting));
  resp.set_waiting_ms(a.waiting_us / 1000);
  resp.set_epoch(a.epoch);
  resp.set_write_lag_ms(a.write_lag_us / 1000);
  resp.set_owner(node);
}

} // namespace

grpc::ServerUnaryReactor* admin_service::InspectOffer(grpc::CallbackServerContext* ctx,
                                                      const v1::InspectOfferRequest* req,
                                                      v1::InspectOfferResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  inspect_offer(*req, resp, [reactor](grpc::Status st) { reactor->Finish(st); });
  return reactor;
}

void admin_service::inspect_offer(const v1::InspectOfferRequest& req,
                                  v1::InspectOfferResponse* resp, done_fn done) {
  if (req.offer_id().empty() || req.offer_id().size() > max_id_len) {
    done(invalid("offer_id must be 1.." + std::to_string(max_id_len) + " bytes"));
    return;
  }
  auto id = req.offer_id();
  caf::timespan timeout{timeout_};
  auto& r = router_;
  auto store = r.any_store();
  auto node_id = cluster_.node_id;
  // Residency is the owner's to tell: asked of the local shard, or of the owner node through
  // its link; unknown (mailbox -1, resident false) while the shard has no owner.
  auto owner = r.route_for(id);
  auto shard = r.shard_of(id);
  resp->set_shard(shard);
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
          auto answer = [=](kit::activity& a) {
            put_activity(a, id, shard, node_id, *resp);
            done(grpc::Status::OK);
          };
          if (owner) {
            // Not fatal when the owner cannot say (moving, unreachable): the stored part stands.
            self->request(owner, timeout, resident_atom_v, id).then(answer, [=](caf::error&) {
              done(grpc::Status::OK);
            });
          } else {
            done(grpc::Status::OK); // the shard is moving: no owner to ask
          }
        },
        [=](caf::error& err) { done(to_status(err)); });
  });
}

grpc::ServerUnaryReactor* admin_service::InspectEntity(grpc::CallbackServerContext* ctx,
                                                       const v1::InspectEntityRequest* req,
                                                       v1::InspectEntityResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (!entities_ || entities_->empty()) {
    reactor->Finish({grpc::StatusCode::NOT_FOUND,
                     "kind: this node hosts no actor types (InspectOffer inspects offers)"});
    return reactor;
  }
  std::string key;
  grpc::StatusCode code;
  if (auto problem = check_entity(*entities_, req->kind(), req->id(), key, code);
      !problem.empty()) {
    reactor->Finish({code, problem});
    return reactor;
  }
  auto shard = router_.shard_of(key);
  resp->set_entity_key(key);
  resp->set_shard(shard);
  resp->set_mailbox(-1);
  auto deadline = clock_type::now() + call_budget(ctx->deadline(), timeout_);
  caf::timespan timeout{timeout_};
  auto node_id = cluster_.node_id;
  auto& r = router_;
  hub_.run([=, &r](caf::event_based_actor* self) {
    // The stored view through the owner (which loads the entity into an actor there).
    auto view = [=, &r] {
      ask_entity_owner(
        self, r, deadline,
        [=](entity_view& v) {
          put_view(v, *resp);
          reactor->Finish(grpc::Status::OK);
        },
        [=](const caf::error& err) { reactor->Finish(to_status(err)); }, view_atom_v, key);
    };
    // Residency first: the view activates the entity on its owner.
    auto owner = r.route_entity(key);
    if (!owner) {
      view(); // moving: the view's routing waits for an owner
      return;
    }
    self->request(owner, timeout, resident_atom_v, key)
      .then(
        [=](kit::activity& a) {
          put_activity(a, key, shard, node_id, *resp);
          view();
        },
        [=](caf::error&) { view(); }); // not fatal: the stored part stands
  });
  return reactor;
}

namespace {

/// What PostgreSQL tells of the stages: queue and dead-letter counts, and the pauses.
struct stage_table {
  std::map<std::string, persistence::stage_counts> counts;
  std::map<std::string, persistence::stage_pause> pauses;
};

caf::expected<stage_table> read_stage_table(persistence::pg_pool& pool, int64_t now_us) {
  auto counts = persistence::count_stages(pool, now_us);
  if (!counts)
    return counts.error();
  auto pauses = persistence::list_stage_pauses(pool);
  if (!pauses)
    return pauses.error();
  stage_table t;
  for (auto& c : *counts)
    t.counts[c.stage_id] = c;
  for (auto& p : *pauses)
    t.pauses[p.stage_id] = p;
  return t;
}

int64_t age_ms(int64_t since_us, int64_t now_us) {
  return since_us == 0 ? 0 : std::max<int64_t>(0, now_us - since_us) / 1000;
}

/// Every stage id worth a row: registered here, or with queue entries, dead letters or a pause
/// in PostgreSQL (a stage another node or an older version ran).
std::set<std::string> stage_ids(const stage_registry& reg, const stage_table& t) {
  std::set<std::string> ids;
  for (auto& e : reg.all())
    ids.insert(e.id);
  for (auto& [id, c] : t.counts)
    ids.insert(id);
  for (auto& [id, p] : t.pauses)
    ids.insert(id);
  return ids;
}

const auto lg = gost::log::get("console");

} // namespace

grpc::ServerUnaryReactor* admin_service::ListStages(grpc::CallbackServerContext* ctx,
                                                    const v1::ListStagesRequest*,
                                                    v1::ListStagesResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  list_stages(resp, [reactor](grpc::Status st) { reactor->Finish(st); });
  return reactor;
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

grpc::ServerUnaryReactor* admin_service::Top(grpc::CallbackServerContext* ctx,
                                             const v1::TopRequest*, v1::TopResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  top(resp, [reactor](grpc::Status st) { reactor->Finish(st); });
  return reactor;
}

void admin_service::top(v1::TopResponse* resp, done_fn done) {
  auto pool = cluster_.pool;
  auto stages = stages_;
  auto stats = stats_;
  auto node_id = cluster_.node_id;
  auto image_figures = image_figures_;
  hub_.run_blocking([=] {
    auto now = kit::now_us();
    resp->set_node_id(node_id);
    if (image_figures != nullptr) {
      std::map<images::function, uint64_t> failed;
      for (auto& [k, n] : image_figures->failures())
        failed[k.first] += n;
      for (auto fn : {images::function::ratio, images::function::preview,
                      images::function::main_color, images::function::rotate}) {
        auto& f = image_figures->functions[images::image_stats::slot(fn)];
        auto* t = resp->add_images();
        t->set_function(images::to_string(fn));
        t->set_workers(f.workers.load(std::memory_order_relaxed));
        t->set_in_flight(f.in_flight.load(std::memory_order_relaxed));
        t->set_waiting(f.waiting.load(std::memory_order_relaxed));
        t->set_queued(f.queued.load(std::memory_order_relaxed));
        t->set_computed(f.computed.load(std::memory_order_relaxed));
        t->set_failed(failed[fn]);
        t->set_cache_hits(f.cache_hits.load(std::memory_order_relaxed));
        t->set_cache_misses(f.cache_misses.load(std::memory_order_relaxed));
        t->set_skipped(f.skipped.load(std::memory_order_relaxed));
      }
    }
    resp->set_at_us(now);
    // The shards' own figures: atomics the shards and their actors keep; nobody is asked.
    std::vector<v1::ShardTop> shards;
    for (auto& [shard, f] : stats->offer_shards.live()) {
      v1::ShardTop t;
      t.set_shard(shard);
      t.set_resident(f->resident.load(std::memory_order_relaxed));
      t.set_mailbox(f->mailbox.load(std::memory_order_relaxed));
      t.set_runs(f->runs.load(std::memory_order_relaxed));
      t.set_failures(f->failures.load(std::memory_order_relaxed));
      t.set_running(f->running.load(std::memory_order_relaxed));
      t.set_backlog(f->backlog.load(std::memory_order_relaxed));
      t.set_oldest_due_age_ms(age_ms(f->oldest_due_us.load(std::memory_order_relaxed), now));
      t.set_epoch(f->epoch.load(std::memory_order_relaxed));
      if (auto* w = stats->offer_writes.slot_for(shard)) {
        t.set_write_lag_ms(age_ms(w->oldest_us.load(std::memory_order_relaxed), now));
        t.set_write_batch(w->last_batch.load(std::memory_order_relaxed));
      }
      shards.push_back(std::move(t));
    }
    // Largest mailboxes first, then the largest backlogs.
    std::sort(shards.begin(), shards.end(), [](const v1::ShardTop& a, const v1::ShardTop& b) {
      return std::make_tuple(-a.mailbox(), -a.backlog(), a.shard())
             < std::make_tuple(-b.mailbox(), -b.backlog(), b.shard());
    });
    for (auto& t : shards)
      *resp->add_shards() = std::move(t);
    auto table = read_stage_table(*pool, now);
    if (!table) {
      done(to_status(table.error()));
      return;
    }
    std::vector<v1::StageTop> rows;
    for (auto& id : stage_ids(*stages, *table)) {
      v1::StageTop t;
      t.set_stage_id(id);
      if (auto* m = stats->stage(id)) {
        t.set_runs(m->runs.load());
        t.set_failures(m->failures.load());
      }
      if (auto c = table->counts.find(id); c != table->counts.end()) {
        t.set_queued(c->second.queued);
        t.set_oldest_due_age_ms(age_ms(c->second.oldest_due_us, now));
        t.set_dead_letters(c->second.dead_letters);
      }
      t.set_paused(table->pauses.count(id) != 0);
      rows.push_back(std::move(t));
    }
    std::sort(rows.begin(), rows.end(), [](const v1::StageTop& a, const v1::StageTop& b) {
      return std::make_tuple(-static_cast<int64_t>(a.queued()), a.stage_id())
             < std::make_tuple(-static_cast<int64_t>(b.queued()), b.stage_id());
    });
    for (auto& t : rows)
      *resp->add_stages() = std::move(t);
    done(grpc::Status::OK);
  });
}

grpc::Status admin_service::allowed(grpc::CallbackServerContext* ctx, const char* verb) const {
  if (access_.token.empty()) {
    if (access_.loopback)
      return grpc::Status::OK;
    return {grpc::StatusCode::PERMISSION_DENIED,
            std::string{verb} + " refused: the node listens on grpc.listen=" + access_.listen
              + ", not a loopback address, and has no `console.token`; set `console.token` on "
                "the node and pass it with gostctl --token (or GOST_TOKEN)"};
  }
  auto& md = ctx->client_metadata();
  auto given = md.find("x-gost-token");
  if (given == md.end())
    return {grpc::StatusCode::UNAUTHENTICATED,
            std::string{verb}
              + " refused: the node needs its `console.token` in the call (gostctl --token, or "
                "GOST_TOKEN; metadata x-gost-token)"};
  if (std::string(given->second.data(), given->second.size()) != access_.token)
    return {grpc::StatusCode::UNAUTHENTICATED,
            std::string{verb} + " refused: the token given is not the node's `console.token`"};
  return grpc::Status::OK;
}

namespace {

/// INVALID_ARGUMENT naming `stage_id` unless it is a stage registered on this node.
grpc::Status registered_stage(const stage_registry& reg, const std::string& id) {
  if (id.empty())
    return invalid("stage_id is required");
  if (reg.find(id) != nullptr)
    return grpc::Status::OK;
  std::string known;
  for (auto& e : reg.all())
    known += (known.empty() ? "" : ", ") + e.id;
  return invalid("stage_id `" + id + "` is not a stage of this node (stages: "
                 + (known.empty() ? std::string{"none"} : known) + ")");
}

/// Who asked, for the log: the caller's own words (gostctl --who) and its address.
std::string who_asked(grpc::CallbackServerContext* ctx, const std::string& who) {
  return (who.empty() ? std::string{"(not given)"} : who) + " peer=" + ctx->peer();
}

/// The filter as persistence takes it; a problem naming the field, or OK.
grpc::Status dead_letter_filter_of(const v1::DeadLetterFilter& in,
                                   persistence::dead_letter_filter& out) {
  out.stage_id = in.stage_id();
  if (in.has_since())
    out.since_us = TimeUtil::TimestampToMicroseconds(in.since());
  if (in.has_until())
    out.until_us = TimeUtil::TimestampToMicroseconds(in.until());
  if ((in.has_since() && out.since_us <= 0) || (in.has_until() && out.until_us <= 0))
    return invalid("filter.since and filter.until must be after the Unix epoch");
  if (out.since_us != 0 && out.until_us != 0 && out.until_us <= out.since_us)
    return invalid("filter.until must be after filter.since");
  return grpc::Status::OK;
}

/// Text of a filter for the log.
std::string describe(const persistence::dead_letter_filter& f) {
  std::string out;
  if (!f.ids.empty()) {
    out += "ids=";
    for (size_t i = 0; i < f.ids.size(); ++i)
      out += (i ? "," : "") + std::to_string(f.ids[i]);
  }
  if (!f.stage_id.empty())
    out += (out.empty() ? "" : " ") + std::string{"stage="} + f.stage_id;
  if (f.since_us != 0)
    out += (out.empty() ? "" : " ") + std::string{"since="}
           + TimeUtil::ToString(TimeUtil::MicrosecondsToTimestamp(f.since_us));
  if (f.until_us != 0)
    out += (out.empty() ? "" : " ") + std::string{"until="}
           + TimeUtil::ToString(TimeUtil::MicrosecondsToTimestamp(f.until_us));
  return out;
}

} // namespace

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
  auto* reactor = ctx->DefaultReactor();
  const char* verb = pause ? "pause" : "resume";
  if (auto ok = allowed(ctx, verb); !ok.ok()) {
    reactor->Finish(ok);
    return reactor;
  }
  auto id = req->stage_id();
  // Pausing needs a stage this node knows; a resume also takes a stage no longer registered
  // (a pause left behind by an older version).
  if (auto st = pause        ? registered_stage(*stages_, id)
                : id.empty() ? invalid("stage_id is required")
                             : grpc::Status::OK;
      !st.ok()) {
    reactor->Finish(st);
    return reactor;
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
      reactor->Finish(to_status(changed.error()));
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
          reactor->Finish(grpc::Status::OK);
          worker->quit();
        },
        [=](caf::error& err) {
          reactor->Finish(to_status(err));
          worker->quit();
        });
  });
  return reactor;
}

grpc::ServerUnaryReactor* admin_service::DrainNode(grpc::CallbackServerContext* ctx,
                                                   const v1::DrainNodeRequest* req,
                                                   v1::DrainNodeResponse* resp) {
  return drain_verb(ctx, req, resp, true);
}

grpc::ServerUnaryReactor* admin_service::UndrainNode(grpc::CallbackServerContext* ctx,
                                                     const v1::DrainNodeRequest* req,
                                                     v1::DrainNodeResponse* resp) {
  return drain_verb(ctx, req, resp, false);
}

grpc::ServerUnaryReactor* admin_service::drain_verb(grpc::CallbackServerContext* ctx,
                                                    const v1::DrainNodeRequest* req,
                                                    v1::DrainNodeResponse* resp, bool drain) {
  auto* reactor = ctx->DefaultReactor();
  const char* verb = drain ? "drain" : "undrain";
  if (auto ok = allowed(ctx, verb); !ok.ok()) {
    reactor->Finish(ok);
    return reactor;
  }
  auto node_id = cluster_.node_id;
  if (!req->node_id().empty() && req->node_id() != node_id) {
    reactor->Finish({grpc::StatusCode::FAILED_PRECONDITION,
                     "this is node " + node_id + ", not " + req->node_id()
                       + ": a node drains itself; ask it at its grpc address (gostctl nodes; "
                         "gostctl "
                       + verb + " NODE finds it)"});
    return reactor;
  }
  resp->set_node_id(node_id);
  auto who = who_asked(ctx, req->who());
  auto manager = cluster_.manager;
  // Each shard drains for at most 30 s (the manager's cut), all at once.
  caf::timespan timeout{timeout_ + std::chrono::seconds{35}};
  lg->info("node {} asked node={} by={}", verb, node_id, who);
  hub_.run([=](caf::event_based_actor* self) {
    auto failed = [=](caf::error& err) {
      lg->warn("node {} failed node={} by={} error={}", verb, node_id, who, error_message(err));
      reactor->Finish(to_status(err));
    };
    if (drain)
      self->request(manager, timeout, drain_node_atom_v)
        .then(
          [=](uint32_t handed_off) {
            lg->info("node drained node={} handed_off={} by={}", node_id, handed_off, who);
            resp->set_changed(true);
            resp->set_handed_off(handed_off);
            reactor->Finish(grpc::Status::OK);
          },
          failed);
    else
      self->request(manager, timeout, undrain_atom_v)
        .then(
          [=](bool changed) {
            lg->info("node undrained node={} changed={} by={}", node_id, changed, who);
            resp->set_changed(changed);
            reactor->Finish(grpc::Status::OK);
          },
          failed);
  });
  return reactor;
}

grpc::ServerUnaryReactor* admin_service::PassivateOffer(grpc::CallbackServerContext* ctx,
                                                        const v1::PassivateOfferRequest* req,
                                                        v1::PassivateOfferResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (auto ok = allowed(ctx, "passivate"); !ok.ok()) {
    reactor->Finish(ok);
    return reactor;
  }
  if (req->offer_id().empty()) {
    reactor->Finish(invalid("offer_id is required"));
    return reactor;
  }
  auto id = req->offer_id();
  auto shard = router_.shard_of(id);
  resp->set_shard(shard);
  auto local = router_.local(shard);
  if (!local) {
    reactor->Finish({grpc::StatusCode::FAILED_PRECONDITION,
                     "offer " + id + " is in shard " + std::to_string(shard)
                       + ", which this node does not own; ask its owner (gostctl shards, then "
                         "--addr of that node)"});
    return reactor;
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
          reactor->Finish(grpc::Status::OK);
        },
        [=](caf::error& err) { reactor->Finish(to_status(err)); });
  });
  return reactor;
}

grpc::ServerUnaryReactor* admin_service::RequeueOffer(grpc::CallbackServerContext* ctx,
                                                      const v1::RequeueOfferRequest* req,
                                                      v1::RequeueOfferResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (auto ok = allowed(ctx, "requeue"); !ok.ok()) {
    reactor->Finish(ok);
    return reactor;
  }
  if (req->offer_id().empty()) {
    reactor->Finish(invalid("offer_id is required"));
    return reactor;
  }
  if (auto st = registered_stage(*stages_, req->stage_id()); !st.ok()) {
    reactor->Finish(st);
    return reactor;
  }
  auto id = req->offer_id();
  auto stage = req->stage_id();
  auto who = who_asked(ctx, req->who());
  auto shard = router_.shard_of(id);
  resp->set_shard(shard);
  auto pool = cluster_.pool;
  auto* routes = &router_;
  hub_.run_blocking([=] {
    auto entry = persistence::requeue_offer(*pool, id, stage, kit::now_us());
    if (!entry) {
      reactor->Finish(to_status(entry.error()));
      return;
    }
    if (!*entry) {
      reactor->Finish({grpc::StatusCode::NOT_FOUND, "offer " + id + " does not exist"});
      return;
    }
    lg->info("offer requeued offer={} stage={} shard={} by={}", id, stage, shard, who);
    *resp->mutable_due_at() = TimeUtil::MicrosecondsToTimestamp((*entry)->due_at_us);
    // The owner on this node hears of it now; another node's shard finds it by its next poll.
    if (auto local = routes->local(shard))
      caf::anon_send(*local, enqueued_atom_v, persistence::queue_entries{**entry},
                     static_cast<uint8_t>(kit::event_source::console));
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* admin_service::ListDeadLetters(grpc::CallbackServerContext* ctx,
                                                         const v1::ListDeadLettersRequest* req,
                                                         v1::ListDeadLettersResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  list_dead_letters(*req, resp, [reactor](grpc::Status st) { reactor->Finish(st); });
  return reactor;
}

void admin_service::list_dead_letters(const v1::ListDeadLettersRequest& req,
                                      v1::ListDeadLettersResponse* resp, done_fn done) {
  uint32_t size = 0;
  if (auto problem = check_page_size("page_size", req.page_size(), limits_, size);
      !problem.empty()) {
    done(invalid(problem));
    return;
  }
  int64_t after = 0;
  if (!req.page_token().empty()) {
    char* end = nullptr;
    errno = 0;
    after = std::strtoll(req.page_token().c_str(), &end, 10);
    if (errno != 0 || *end != '\0' || after < 0) {
      done(invalid("page_token `" + req.page_token()
                   + "` is not one this call gave (next_page_token)"));
      return;
    }
  }
  persistence::dead_letter_filter f;
  if (auto st = dead_letter_filter_of(req.filter(), f); !st.ok()) {
    done(st);
    return;
  }
  auto pool = cluster_.pool;
  hub_.run_blocking([=] {
    // One more than the page: whether a next page exists.
    auto rows = persistence::list_dead_letters(*pool, f, after, size + 1);
    if (!rows) {
      done(to_status(rows.error()));
      return;
    }
    bool more = rows->size() > size;
    if (more)
      rows->resize(size);
    for (auto& d : *rows) {
      auto* out = resp->add_letters();
      out->set_id(d.id);
      out->set_shard(d.shard);
      out->set_offer_id(d.offer_id);
      out->set_stage_id(d.stage_id);
      out->set_reason(d.reason);
      out->set_attempts(d.attempts);
      *out->mutable_created_at() = TimeUtil::MicrosecondsToTimestamp(d.created_us);
    }
    if (more && !rows->empty())
      resp->set_next_page_token(std::to_string(rows->back().id));
    done(grpc::Status::OK);
  });
}

grpc::ServerUnaryReactor* admin_service::RetryDeadLetters(grpc::CallbackServerContext* ctx,
                                                          const v1::DeadLettersVerbRequest* req,
                                                          v1::DeadLettersVerbResponse* resp) {
  return dead_letter_verb(ctx, req, resp, true);
}

grpc::ServerUnaryReactor* admin_service::DiscardDeadLetters(grpc::CallbackServerContext* ctx,
                                                            const v1::DeadLettersVerbRequest* req,
                                                            v1::DeadLettersVerbResponse* resp) {
  return dead_letter_verb(ctx, req, resp, false);
}

grpc::ServerUnaryReactor* admin_service::dead_letter_verb(grpc::CallbackServerContext* ctx,
                                                          const v1::DeadLettersVerbRequest* req,
                                                          v1::DeadLettersVerbResponse* resp,
                                                          bool retry) {
  auto* reactor = ctx->DefaultReactor();
  if (auto ok = allowed(ctx, retry ? "retry dead letters" : "discard dead letters"); !ok.ok()) {
    reactor->Finish(ok);
    return reactor;
  }
  persistence::dead_letter_filter f;
  if (auto st = dead_letter_filter_of(req->filter(), f); !st.ok()) {
    reactor->Finish(st);
    return reactor;
  }
  f.ids.assign(req->ids().begin(), req->ids().end());
  for (auto id : f.ids)
    if (id <= 0) {
      reactor->Finish(invalid("ids: " + std::to_string(id) + " is not a dead letter id"));
      return reactor;
    }
  if (f.empty()) {
    // Never every letter by accident: say which.
    reactor->Finish(invalid("give ids, or a filter (filter.stage_id, filter.since, filter.until); "
                            "an empty filter would match every dead letter"));
    return reactor;
  }
  // A retry queues the stage: it must be one this node runs (a discard may clear any).
  if (retry && !f.stage_id.empty())
    if (auto st = registered_stage(*stages_, f.stage_id); !st.ok()) {
      reactor->Finish(st);
      return reactor;
    }
  auto who = who_asked(ctx, req->who());
  auto pool = cluster_.pool;
  auto* routes = &router_;
  hub_.run_blocking([=] {
    auto what = describe(f);
    if (!retry) {
      auto n = persistence::discard_dead_letters(*pool, f);
      if (!n) {
        reactor->Finish(to_status(n.error()));
        return;
      }
      lg->info("dead letters discarded {} released={} by={}", what, *n, who);
      resp->set_released(*n);
      reactor->Finish(grpc::Status::OK);
      return;
    }
    auto r = persistence::retry_dead_letters(*pool, f, kit::now_us());
    if (!r) {
      reactor->Finish(to_status(r.error()));
      return;
    }
    lg->info("dead letters retried {} released={} requeued={} by={}", what, r->released,
             r->entries.size(), who);
    resp->set_released(r->released);
    resp->set_requeued(r->entries.size());
    // As RequeueOffer: the owners on this node hear of it now; another node's shard finds the
    // entries by its next poll.
    std::map<uint32_t, persistence::queue_entries> by_shard;
    for (size_t i = 0; i < r->entries.size(); ++i)
      by_shard[r->shards[i]].push_back(r->entries[i]);
    for (auto& [shard, entries] : by_shard)
      if (auto local = routes->local(shard))
        caf::anon_send(*local, enqueued_atom_v, std::move(entries),
                       static_cast<uint8_t>(kit::event_source::console));
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* admin_service::ListNodes(grpc::CallbackServerContext* ctx,
                                                   const v1::ListNodesRequest*,
                                                   v1::ListNodesResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  list_nodes(resp, [reactor](grpc::Status st) { reactor->Finish(st); });
  return reactor;
}

void admin_service::list_nodes(v1::ListNodesResponse* resp, done_fn done) {
  auto view = cluster_;
  hub_.run_blocking([done, resp, view] {
    auto nodes = persistence::list_nodes(*view.pool, view.lease_timeout);
    auto leases = persistence::list_leases(*view.pool, view.lease_timeout);
    if (!nodes || !leases) {
      done(to_status(nodes ? leases.error() : nodes.error()));
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
    done(grpc::Status::OK);
  });
}

grpc::ServerUnaryReactor* admin_service::ListShards(grpc::CallbackServerContext* ctx,
                                                    const v1::ListShardsRequest*,
                                                    v1::ListShardsResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  list_shards(resp, [reactor](grpc::Status st) { reactor->Finish(st); });
  return reactor;
}

void admin_service::list_shards(v1::ListShardsResponse* resp, done_fn done) {
  auto view = cluster_;
  hub_.run_blocking([done, resp, view] {
    auto leases = persistence::list_leases(*view.pool, view.lease_timeout);
    if (!leases) {
      done(to_status(leases.error()));
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
    done(grpc::Status::OK);
  });
}

namespace {

/// A diff as the API sends it.
void add_changes(const std::vector<rpc::field_change>& in,
                 google::protobuf::RepeatedPtrField<v1::FieldChange>& out) {
  for (auto& c : in) {
    auto* f = out.Add();
    f->set_path(c.path);
    f->set_kind(c.what == rpc::field_change::kind::added     ? v1::FieldChange::ADDED
                : c.what == rpc::field_change::kind::removed ? v1::FieldChange::REMOVED
                                                             : v1::FieldChange::CHANGED);
    f->set_before(c.before);
    f->set_after(c.after);
  }
}

/// An empty message of the Any's type (the other side of a state that appeared or went).
google::protobuf::Any empty_of(const google::protobuf::Any& any) {
  google::protobuf::Any out;
  out.set_type_url(any.type_url());
  return out;
}

/// One history entry: `ev` against `base` (the change before it; null: none kept).
void describe_change(const persistence::history_row& row, const v1::OfferSaved& ev,
                     const v1::OfferSaved* base, const rpc::type_pool& pool, v1::OfferChange& out) {
  out.set_id(row.id);
  out.set_version(row.version);
  *out.mutable_at() = TimeUtil::MicrosecondsToTimestamp(row.at_us);
  out.set_source(ev.changed_by());
  out.set_by(ev.by());
  out.set_deleted(ev.deleted());
  out.set_first_kept(base == nullptr);
  static const v1::Offer none;
  add_changes(
    rpc::diff_messages(base ? base->offer() : none, ev.offer(), {"version", "updated_at"}),
    *out.mutable_offer());
  std::set<std::string> stages;
  for (auto& [id, _] : ev.states())
    stages.insert(id);
  if (base)
    for (auto& [id, _] : base->states())
      stages.insert(id);
  for (auto& id : stages) {
    const google::protobuf::Any* before = nullptr;
    const google::protobuf::Any* after = nullptr;
    if (base)
      if (auto i = base->states().find(id); i != base->states().end())
        before = &i->second;
    if (auto i = ev.states().find(id); i != ev.states().end())
      after = &i->second;
    if (before && after && before->type_url() == after->type_url()
        && before->value() == after->value())
      continue;
    auto& st = *out.add_states();
    st.set_stage_id(id);
    st.set_type_url(after ? after->type_url() : before->type_url());
    st.set_before_bytes(before ? static_cast<int64_t>(before->value().size()) : -1);
    st.set_after_bytes(after ? static_cast<int64_t>(after->value().size()) : -1);
    auto b = pool.decode(before ? *before : empty_of(*after));
    auto a = pool.decode(after ? *after : empty_of(*before));
    if (!a || !b)
      continue; // not published here: the sizes tell it changed
    st.set_decoded(true);
    add_changes(rpc::diff_messages(*b, *a), *st.mutable_changes());
  }
}

} // namespace

void admin_service::publish_types(const entity_registry* entities) {
  auto out = std::make_shared<v1::DescribeTypesResponse>();
  std::vector<const google::protobuf::Descriptor*> descs;
  for (auto& e : stages_->all()) {
    auto* t = out->add_types();
    t->set_kind(v1::PublishedType::STAGE);
    t->set_id(e.id);
    if (const auto* d = e.impl ? e.impl->state_type() : nullptr) {
      t->set_state_type(d->full_name());
      descs.push_back(d);
    } else {
      t->set_note("the stage declares no state type (an external stage, or one without a "
                  "typed state): its states show as type URL and size");
    }
  }
  if (entities != nullptr)
    for (auto& type : entities->all()) {
      auto* t = out->add_types();
      t->set_kind(v1::PublishedType::ENTITY);
      t->set_id(type->kind());
      t->set_state_type(type->state_descriptor()->full_name());
      t->set_event_type(type->event_descriptor()->full_name());
      descs.push_back(type->state_descriptor());
      descs.push_back(type->event_descriptor());
    }
  // The saved-offer event (with the offer): what the history holds.
  descs.push_back(v1::OfferSaved::descriptor());
  *out->mutable_files() = rpc::files_of(descs);
  pool_ = std::make_shared<rpc::type_pool>(out->files());
  types_ = std::move(out);
}

grpc::ServerUnaryReactor* admin_service::DescribeTypes(grpc::CallbackServerContext* ctx,
                                                       const v1::DescribeTypesRequest*,
                                                       v1::DescribeTypesResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  *resp = *types_;
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* admin_service::OfferHistory(grpc::CallbackServerContext* ctx,
                                                      const v1::OfferHistoryRequest* req,
                                                      v1::OfferHistoryResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (req->offer_id().empty()) {
    reactor->Finish(invalid("offer_id is required"));
    return reactor;
  }
  uint32_t size = std::min<uint32_t>(20, limits_.page_size_max);
  if (req->page_size() != 0)
    if (auto problem = check_page_size("page_size", req->page_size(), limits_, size);
        !problem.empty()) {
      reactor->Finish(invalid(problem));
      return reactor;
    }
  int64_t before = 0;
  if (!req->page_token().empty()) {
    char* end = nullptr;
    errno = 0;
    before = std::strtoll(req->page_token().c_str(), &end, 10);
    if (errno != 0 || *end != '\0' || before <= 0) {
      reactor->Finish(invalid("page_token `" + req->page_token()
                              + "` is not one this call gave (next_page_token)"));
      return reactor;
    }
  }
  resp->set_enabled(history_);
  auto pool = cluster_.pool;
  auto types = pool_;
  auto id = req->offer_id();
  hub_.run_blocking([=] {
    // One more than the page: the base of the page's oldest change, and whether more exist.
    auto rows = persistence::read_history(*pool, id, before, size + 1);
    if (!rows) {
      reactor->Finish(to_status(rows.error()));
      return;
    }
    std::vector<v1::OfferSaved> events(rows->size());
    for (size_t i = 0; i < rows->size(); ++i)
      if (!events[i].ParseFromString((*rows)[i].event)) {
        reactor->Finish({grpc::StatusCode::DATA_LOSS, "history row " + std::to_string((*rows)[i].id)
                                                        + " of offer " + id + " does not parse"});
        return;
      }
    size_t shown = std::min<size_t>(size, rows->size());
    for (size_t i = 0; i < shown; ++i)
      describe_change((*rows)[i], events[i], i + 1 < events.size() ? &events[i + 1] : nullptr,
                      *types, *resp->add_changes());
    if (rows->size() > size)
      resp->set_next_page_token(std::to_string((*rows)[shown - 1].id));
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerWriteReactor<v1::TraceEvent>* admin_service::Trace(grpc::CallbackServerContext*,
                                                               const v1::TraceRequest* req) {
  struct refused final : grpc::ServerWriteReactor<v1::TraceEvent> {
    explicit refused(grpc::Status s) { Finish(std::move(s)); }
    void OnDone() override { delete this; }
  };
  if (!traces_)
    return new refused({grpc::StatusCode::UNIMPLEMENTED, "this node serves no traces"});
  if (int{!req->offer_id().empty()} + int{!req->entity_key().empty()}
        + int{!req->stage_id().empty()}
      != 1)
    return new refused(invalid("give one of offer_id (one offer), entity_key (one durable entity, "
                               "kind/id) or stage_id (one stage)"));
  if (!req->entity_key().empty()) {
    auto slash = req->entity_key().find('/');
    std::string key;
    grpc::StatusCode code;
    if (slash == std::string::npos)
      return new refused(invalid("entity_key: `" + req->entity_key() + "` is not kind/id"));
    if (!entities_)
      return new refused(
        {grpc::StatusCode::NOT_FOUND, "entity_key: this node hosts no actor types"});
    if (auto problem = check_entity(*entities_, req->entity_key().substr(0, slash),
                                    req->entity_key().substr(slash + 1), key, code);
        !problem.empty())
      return new refused({code, "entity_key: " + problem});
  }
  if (!req->stage_id().empty())
    if (auto st = registered_stage(*stages_, req->stage_id()); !st.ok())
      return new refused(st);
  uint32_t events = 0;
  int64_t ms = 0;
  if (auto problem = check_trace(req->max_events(), req->for_ms(), limits_, events, ms);
      !problem.empty())
    return new refused(invalid(problem));
  lg->info("trace started offer={} entity={} stage={} max_events={} for_ms={}", req->offer_id(),
           req->entity_key(), req->stage_id(), events, ms);
  return start_trace(traces_, *req, true, events, ms);
}

} // namespace gost::runtime
