// A shard's scheduled-actions worker: a thin shell over worker_steps (ADR 0011). Each tick
// looks at the shard (one read: incoming rows? the next due time?) and runs a sync iteration
// when there is work, then looks again at once; an idle shard sleeps until its next due row or
// the poll period (new incoming rows), whichever is first. A database error
// is logged once per outage and retried at the poll period; a fenced step ends the worker (the
// shard's new owner runs its own).

#include <chrono>

#include <caf/all.hpp>

#include "gost/core/log.hpp"
#include "gost/scheduled/protocol.hpp"

namespace gost::scheduled {

namespace {

const auto lg = gost::log::get("scheduled");

int64_t system_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

struct worker_state {
  static inline const char* name = "gost.scheduled.worker";
  std::unique_ptr<worker_steps> steps;
  worker_options opts;
  bool failing = false;
  int64_t last_sweep_ms = 0;
};

/// How often a worker deletes its shard's stale parked rows (never due, so never seen).
constexpr int64_t sweep_every_ms = 60'000;

using stateful = worker_actor::stateful_pointer<worker_state>;

worker_actor::behavior_type worker(stateful self, worker_options opts) {
  if (!opts.clock_ms)
    opts.clock_ms = system_ms;
  auto& st = self->state;
  st.opts = opts;
  st.steps = std::make_unique<worker_steps>(
    *opts.pool, persistence::scheduled_lease{opts.shard, opts.epoch}, opts.rules, opts.clock_ms);
  st.steps->set_node(opts.node);
  if (opts.watch) {
    self->monitor(opts.watch);
    self->set_down_handler([self](caf::down_msg&) { self->quit(); });
  }
  self->send(self, tick_atom_v);
  return {
    [self](tick_atom) {
      auto& s = self->state;
      auto wait = s.opts.poll;
      auto again = [self, &wait] {
        if (wait.count() <= 0)
          self->send(self, tick_atom_v);
        else
          self->delayed_send(self, wait, tick_atom_v);
      };
      auto trouble = [&](const caf::error& err) {
        if (!s.failing)
          lg->warn("scheduled worker shard={} step failed error={}; retrying every {} ms",
                   s.opts.shard, persistence::error_message(err), s.opts.poll.count());
        s.failing = true;
        again();
      };
      // An idle shard costs one read per poll: iterate only when there is something to do.
      auto look = persistence::look_at_shard(*s.opts.pool, s.opts.shard);
      if (!look)
        return trouble(look.error());
      auto now = s.opts.clock_ms();
      if (now - s.last_sweep_ms >= sweep_every_ms) {
        s.last_sweep_ms = now;
        if (auto swept = s.steps->sweep(); swept && *swept > 0)
          lg->debug("scheduled worker shard={} swept stale parked rows count={}", s.opts.shard,
                    *swept);
      }
      if (!look->incoming && !(look->next_due && *look->next_due <= now)) {
        if (look->next_due && *look->next_due - now < wait.count())
          wait = std::chrono::milliseconds{*look->next_due - now};
        return again();
      }
      auto it = s.steps->iterate(s.opts.fire, s.opts.batch, s.opts.batch);
      if (!it)
        return trouble(it.error());
      if (s.failing)
        lg->info("scheduled worker shard={} steps work again", s.opts.shard);
      s.failing = false;
      if (it->fenced) {
        lg->info("scheduled worker shard={} epoch={} fenced: the lease moved on; stopping",
                 s.opts.shard, s.opts.epoch);
        self->quit();
        return;
      }
      // Look again at once: the batch may have been full, or the next row is due already.
      wait = std::chrono::milliseconds{0};
      if (static_cast<size_t>(it->moved + it->dropped + it->fired + it->failed) == 0)
        wait = std::chrono::milliseconds{1}; // rows locked by another step: do not spin
      again();
    },
  };
}

} // namespace

worker_actor spawn_worker(caf::actor_system& sys, worker_options opts) {
  return sys.spawn<caf::detached>(worker, std::move(opts));
}

} // namespace gost::scheduled
