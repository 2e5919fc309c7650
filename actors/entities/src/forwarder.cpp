// The forwarder of a shard group's `entity_forwards` (ADR 0023): events sent by this node's
// entities to entities whose rows live in another group's database. A round reads the first
// waiting row of each target among the shards this node owns, sends each through the Send path
// with its request id (stored once at the target), waits for every answer, then deletes the
// delivered rows, holds the failed ones back and dead-letters those refused for good. A round
// that delivered some is followed by another at once (a target's next events); a wake during a
// round asks for one more after it.

#include <caf/actor_system.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "gost/core/errc.hpp"
#include "gost/core/kit/writer.hpp"
#include "gost/core/log.hpp"
#include "gost/entities/spawn.hpp"
#include "gost/persistence/entities/entities.hpp"

namespace gost {

namespace {

const auto lg = gost::log::get("kit");

struct forwarder_state {
  static inline const char* name = "gost.entity_forwarder";
  entity_forwarder_options opts;
  bool round_queued = false; ///< a round message is in the mailbox
  uint64_t tick = 0;         ///< the pending poll's number (older ones are ignored)
};

using forwarder_impl =
  entity_forwarder_actor::extend<caf::reacts_to<run_atom>, caf::reacts_to<tick_atom, uint64_t>>;
using forwarder_ptr = forwarder_impl::stateful_pointer<forwarder_state>;

/// Whether a refusal is for good: the target's owner took the event's measure and said no
/// (a type it does not take, a state it will not leave); anything else may pass later.
bool refused_for_good(const caf::error& err) {
  return err == errc::invalid_argument || err == errc::failed_precondition;
}

/// One round over the first waiting event of each target (so a target gets a sender's events
/// in their order); true when it delivered some (the next ones may be waiting).
bool relay_round(forwarder_state& s) {
  auto& o = s.opts;
  auto shards = o.shards();
  auto rows = persistence::read_entity_forwards(*o.pool, shards, o.batch);
  if (!rows) {
    lg->warn("entity forwards not read group={} error={}", o.group,
             persistence::error_message(rows.error()));
    return false;
  }
  if (rows->empty())
    return false;
  auto now = kit::now_us();
  std::vector<std::future<caf::error>> answers;
  answers.reserve(rows->size());
  for (auto& f : *rows)
    answers.push_back(o.deliver(persistence::entity_key(f.kind, f.entity_id), f.payload,
                                f.request_id, std::max<int64_t>(0, (f.due_at_us - now) / 1000)));
  // Each delivery ends by its own deadline; the bound keeps a stop from waiting on a lost one.
  auto bound = std::chrono::steady_clock::now() + o.answer_bound;
  std::vector<std::string> delivered;
  std::vector<std::pair<std::string, std::string>> failed, given_up;
  const persistence::entity_forward* first_failed = nullptr;
  for (size_t i = 0; i < rows->size(); ++i) {
    auto& f = (*rows)[i];
    caf::error err;
    try {
      if (answers[i].wait_until(bound) == std::future_status::ready)
        err = answers[i].get();
      else
        err = make_error(errc::unavailable, "no answer from the target's owner in time");
    } catch (const std::exception& e) { // the node stopping (a broken promise)
      err = make_error(errc::unavailable, e.what());
    }
    if (!err) {
      delivered.push_back(f.request_id);
      continue;
    }
    auto why = persistence::error_message(err);
    if (refused_for_good(err)) {
      lg->error("entity event given up: its target refused it kind={} id={} from_shard={}"
                " request_id={} error={} (kept in entity_dead_letters)",
                f.kind, f.entity_id, f.shard, f.request_id, why);
      given_up.emplace_back(f.request_id, "relay to another shard group refused: " + why);
      continue;
    }
    if (first_failed == nullptr)
      first_failed = &f;
    failed.emplace_back(f.request_id, std::move(why));
  }
  o.stats->relayed.fetch_add(delivered.size(), std::memory_order_relaxed);
  o.stats->failed.fetch_add(failed.size(), std::memory_order_relaxed);
  o.stats->given_up.fetch_add(given_up.size(), std::memory_order_relaxed);
  if (first_failed != nullptr) { // one line a round: how many, and the first
    auto& f = *first_failed;
    lg->warn("entity events not relayed to another shard group group={} failed={} of={}"
             " first: shard={} kind={} id={} request_id={} attempt={} error={} (retried later)",
             o.group, failed.size(), rows->size(), f.shard, f.kind, f.entity_id, f.request_id,
             f.attempts + 1, failed.front().second);
  }
  if (auto err = persistence::settle_entity_forwards(*o.pool, delivered, failed, given_up))
    lg->warn("entity forwards not settled group={} delivered={} error={} (relayed again: the "
             "targets store them once)",
             o.group, delivered.size(), persistence::error_message(err));
  return !delivered.empty() || !given_up.empty();
}

forwarder_impl::behavior_type forwarder(forwarder_ptr self, entity_forwarder_options opts) {
  auto& s = self->state;
  s.opts = std::move(opts);
  auto queue_round = [self] {
    if (!self->state.round_queued) {
      self->state.round_queued = true;
      self->send(self, run_atom_v);
    }
  };
  auto arm = [self] {
    self->delayed_send(self, self->state.opts.poll, tick_atom_v, ++self->state.tick);
  };
  queue_round();
  return {
    [=](wake_atom) { queue_round(); },
    [=](tick_atom, uint64_t n) {
      if (n == self->state.tick)
        queue_round();
    },
    [=](run_atom) {
      self->state.round_queued = false;
      if (relay_round(self->state))
        queue_round(); // some delivered: their targets' next events may wait
      arm();
    },
  };
}

} // namespace

entity_forwarder_actor spawn_entity_forwarder(caf::actor_system& sys,
                                              entity_forwarder_options opts) {
  return caf::actor_cast<entity_forwarder_actor>(
    sys.spawn<caf::detached>(forwarder, std::move(opts)));
}

} // namespace gost
