// Scheduled actions (seed 001, docs/scheduled-actions.md): the seed's scheduler for the API,
// and the workers — one per shard this node holds a lease for, spawned with the shard's
// supervisors (start_cluster.cpp) and stopped with them, woken by their shard group's poller
// (ADR 0015; one per group, reading its database, ADR 0023) — with what carries out an attempt:
// an HTTP call (libcurl, in gost_scheduled), a Kafka message (a producer per worker, made on
// its first Kafka action), or an event to an entity (an offer re-queued into a stage through
// the offer's owner, a task event through its owner, each with the occurrence's key as request
// id: done once).

#include <chrono>
#include <future>
#include <map>

#include <caf/scoped_actor.hpp>
#include <google/protobuf/any.pb.h>

#include "cluster/ask_owner_async.hpp"
#include "cluster/builtin_kinds.hpp"
#include "cluster/router.hpp"
#include "gost/core/errc.hpp"
#include "gost/core/log.hpp"
#include "gost/offers/protocol.hpp"
#include "gost/persistence/entities/entities.hpp"
#include "gost/persistence/tasks/tasks.hpp"
#include "gost/scheduled/http_call.hpp"
#include "gost/scheduled/protocol.hpp"
#include "gost/scheduled/scheduler.hpp"
#include "gost/tasks/protocol.hpp"
#include "kafka/sync_sender.hpp"
#include "node/start.hpp"

namespace gost::runtime {

namespace {

const auto lg = gost::log::get("scheduled");

int64_t system_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

scheduled::rules_options rules_of(const config::scheduled_config& c) {
  scheduled::rules_options r;
  r.allow_private_targets = c.allow_private_targets;
  r.default_max_attempts = c.default_max_attempts;
  r.default_backoff_ms = c.default_backoff.count();
  r.default_deadline_ms = c.default_deadline.count();
  return r;
}

/// What one worker carries out attempts with; lives on the worker's thread.
class firing {
public:
  firing(node_context& n, scheduled::rules_options rules) : n_(n), rules_(rules) {}

  std::string operator()(const scheduled::attempt& a) {
    auto deadline = std::chrono::milliseconds{a.deadline_ms};
    switch (a.spec.action_case()) {
      case v1::ScheduledActionSpec::kHttp:
        return scheduled::call_http(a.spec.http(), a.idempotency_key, deadline,
                                    rules_.allow_private_targets);
      case v1::ScheduledActionSpec::kKafka: return kafka(a);
      case v1::ScheduledActionSpec::kEvent:
        if (a.spec.event().has_offer_requeue())
          return requeue(a, deadline);
        if (a.spec.event().has_task_event())
          return task_event(a, deadline);
        return "unknown event target";
      default: return "unknown action kind";
    }
  }

private:
  /// Through the offer's owner like every write (as gostctl requeue): its actor writes the
  /// entry under the shard's lease fence; the occurrence's key is the request id, so an attempt
  /// retried after a lost answer queues it once. A refusal (no owner in time, a stale lease) is
  /// a failed attempt: the action's retry policy tries again.
  std::string requeue(const scheduled::attempt& a, std::chrono::milliseconds deadline) {
    auto& r = a.spec.event().offer_requeue();
    if (!n_.stages || n_.stages->find(r.stage_id()) == nullptr)
      return "stage `" + r.stage_id() + "` is not a stage of this node";
    auto until = clock_type::now() + deadline;
    auto answer = ask_owner_async<int64_t>(
      *n_.hub, *n_.routes, until, [](int64_t due_us) { return due_us; }, requeue_atom_v,
      r.offer_id(), r.stage_id(), request_id{a.idempotency_key, "scheduled", a.action_id});
    // The ask ends by its deadline (a last attempt on another node may take a little longer).
    if (answer.wait_until(until + remote_attempt) != std::future_status::ready)
      return "the owner of the offer's shard did not answer in time";
    try {
      auto due = answer.get();
      return due ? std::string{} : persistence::error_message(due.error());
    } catch (const std::future_error&) { // the hub stopped with the ask parked
      return "the node is stopping";
    }
  }

  std::string task_event(const scheduled::attempt& a, std::chrono::milliseconds deadline) {
    auto& t = a.spec.event().task_event();
    auto group = tasks::group_of_task(t.task_id());
    if (!group)
      return "`" + t.task_id() + "` is not a task id (<group>:<key>)";
    auto g = persistence::find_task_group(*n_.pool, *group);
    if (!g)
      return persistence::error_message(g.error());
    if (!*g)
      return "no task group `" + *group + "`";
    v1::TaskEvent e;
    e.mutable_custom()->set_name(t.name());
    if (!t.payload().empty()
        && !e.mutable_custom()->mutable_payload()->ParseFromString(t.payload()))
      return "the payload is not a serialized google.protobuf.Any";
    any_msg packed;
    packed.value.PackFrom(e);
    auto key = persistence::entity_key(tasks::task_kind((*g)->task_type), t.task_id());
    auto owner = n_.routes->route(kinds::entities, key);
    if (!owner)
      return "no owner of the task's shard right now";
    std::string error;
    caf::scoped_actor self{*n_.sys};
    // The occurrence's key as request id: a retry after a crash stores the event once.
    self->request(owner, deadline, send_atom_v, key, packed, a.idempotency_key, int64_t{0})
      .receive([](ok_atom) {}, [&](caf::error& err) { error = persistence::error_message(err); });
    return error;
  }

  std::string kafka(const scheduled::attempt& a) {
    if (n_.cfg.kafka.brokers.empty())
      return "kafka.brokers is empty: set it for Kafka actions";
    if (!sender_) {
      kafka::producer_options po;
      po.role = "the scheduled actions' Kafka producer";
      po.settings.push_back(kafka::brokers_setting(n_.cfg.kafka.brokers));
      po.settings.push_back({"message.timeout.ms", std::to_string(rules_.default_deadline_ms),
                             "scheduled.default_deadline"});
      sender_ = std::make_unique<kafka::sync_sender>(std::move(po));
    }
    auto& k = a.spec.kafka();
    // The occurrence's key as a header, as HTTP actions send it: a consumer de-duplicates.
    return sender_->send(k.topic(), k.key(), k.value(), {{"Idempotency-Key", a.idempotency_key}});
  }

  node_context& n_;
  scheduled::rules_options rules_;
  std::unique_ptr<kafka::sync_sender> sender_;
};

} // namespace

/// The wake notices' name for the scheduled workers' shards (cluster/wakes.hpp).
constexpr const char* scheduled_wake_part = "scheduled";

caf::error start_scheduled(node_context& n) {
  auto rules = rules_of(n.cfg.scheduled);
  // An action lives in its id's home group's database (scheduler.hpp); each group's shards'
  // workers work in their group's database.
  n.scheduled_api =
    std::make_unique<scheduled::scheduler>(n.placement, rules, system_ms, n.cfg.node.id);
  // A poller per shard group, reading that group's database.
  auto pollers = std::make_shared<std::map<uint32_t, scheduled::poller_actor>>();
  if (n.cfg.scheduled.enabled) {
    // One read per poll period for all the node's shards of a group wakes their workers (ADR
    // 0015), backing off when idle; actions created or changed wake it at once
    // (cluster/wakes.hpp: here, or on the owner of the shard through a wake notice).
    for (auto& part : n.groups)
      (*pollers)[part->group.id] = scheduled::spawn_poller(
        *n.sys, *part->pool, n.cfg.scheduled.poll, n.cfg.scheduled.poll_idle);
    scheduled::add_scheduled_metrics(*n.registry, n.scheduled_stats);
    n.spawn_scheduled_worker = [&n, rules, pollers](uint32_t shard, uint32_t group, int64_t epoch,
                                                    caf::actor watch) {
      scheduled::worker_options wo;
      wo.pool = n.part_for(group).pool; // the lease's group's database
      wo.shard = shard;
      wo.epoch = epoch;
      wo.rules = rules;
      wo.poll = n.cfg.scheduled.poll;
      wo.poller = pollers->at(group);
      wo.batch = static_cast<size_t>(n.cfg.scheduled.batch);
      wo.node = n.cfg.node.id;
      auto fire = std::make_shared<firing>(n, rules);
      wo.fire = [fire](const scheduled::attempt& a) { return (*fire)(a); };
      wo.watch = std::move(watch);
      wo.stats = n.scheduled_stats;
      scheduled::spawn_worker(*n.sys, std::move(wo));
    };
    // Incoming rows: the shard's owner looks now (the shard's group's poller here, or the
    // owner's through a wake notice).
    // Weak: the hub outlives the pollers, detached actors the system waits for until their
    // last strong handles go.
    std::map<uint32_t, caf::actor_addr> weak;
    for (auto& [group, p] : *pollers)
      weak[group] = p.address();
    n.wakes->add_part(scheduled_wake_part, [weak, where = n.placement](uint32_t shard) {
      auto i = weak.find(where->group_of(shard));
      if (i == weak.end())
        return;
      if (auto p = caf::actor_cast<scheduled::poller_actor>(i->second))
        caf::anon_send(p, wake_atom_v, shard);
    });
  }
  n.scheduled_api->on_incoming(
    [wakes = n.wakes](uint32_t shard) { wakes->wake(scheduled_wake_part, shard); });
  // Workers stop with their shards (earlier in the stop order); no new ones after this.
  n.stops.push("scheduled actions", [&n, pollers] {
    n.spawn_scheduled_worker = nullptr;
    for (auto& [group, p] : *pollers)
      caf::anon_send_exit(p, caf::exit_reason::user_shutdown);
    pollers->clear();
    n.scheduled_api.reset();
  });
  return {};
}

} // namespace gost::runtime
