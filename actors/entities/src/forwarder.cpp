// The forwarder of a shard group's `entity_forwards` (ADR 0023): events sent by this node's
// entities to entities whose rows live in another group's database. A round reads the rows of
// the shards this node owns, sends each through the Send path with a request id of its own
// (stored once at the target), waits for every answer, then deletes the delivered rows and
// pushes the failed ones back. A wake during a round asks for one more round after it.

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

/// One round; true when it relayed a full batch (more may be waiting).
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
                                o.request_prefix + std::to_string(f.id),
                                std::max<int64_t>(0, (f.due_at_us - now) / 1000)));
  std::vector<int64_t> delivered;
  std::vector<std::pair<int64_t, std::string>> failed;
  size_t first_failed = 0;
  for (size_t i = 0; i < rows->size(); ++i) {
    auto& f = (*rows)[i];
    caf::error err;
    try {
      err = answers[i].get();
    } catch (const std::exception& e) { // the node stopping (a broken promise)
      err = make_error(errc::unavailable, e.what());
    }
    if (!err) {
      delivered.push_back(f.id);
      continue;
    }
    if (failed.empty())
      first_failed = i;
    failed.emplace_back(f.id, persistence::error_message(err));
  }
  if (!failed.empty()) { // one line a round: how many, and the first
    auto& f = (*rows)[first_failed];
    lg->warn("entity events not relayed to another shard group group={} failed={} of={}"
             " first: shard={} kind={} id={} forward={} attempt={} error={} (retried later)",
             o.group, failed.size(), rows->size(), f.shard, f.kind, f.entity_id, f.id,
             f.attempts + 1, failed.front().second);
  }
  if (auto err = persistence::settle_entity_forwards(*o.pool, delivered, failed))
    lg->warn("entity forwards not settled group={} delivered={} error={} (relayed again: the "
             "targets store them once)",
             o.group, delivered.size(), persistence::error_message(err));
  return failed.empty() && rows->size() == o.batch;
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
        queue_round(); // a full batch: more may wait
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
