// A shard's scheduled-actions worker: a thin shell over worker_steps (ADR 0011), and the node's
// poller that wakes the workers (ADR 0015).
//
// A worker runs a sync iteration when it has work, then looks again at once (one read: incoming
// rows? the next due time?); with nothing to do now it sleeps until its next due row. What it
// cannot know by itself — rows the API added to its shard, on any node — the poller tells it:
// one read per poll period for all the node's shards, instead of one per shard. A worker spawned
// without a poller looks at its shard every poll period itself. A database error is logged once
// per outage and retried at the poll period; a fenced step ends the worker (the shard's new owner
// runs its own).

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>
#include <unordered_map>

#include <caf/all.hpp>

#include "gost/core/backoff.hpp"
#include "gost/core/log.hpp"
#include "gost/persistence/pg_pool.hpp" // complete: spawn forwards the pointer
#include "gost/scheduled/protocol.hpp"

namespace gost::scheduled {

namespace {

const auto lg = gost::log::get("scheduled");

int64_t system_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

constexpr int64_t never = std::numeric_limits<int64_t>::max();

struct worker_state {
  static inline const char* name = "gost.scheduled.worker";
  std::unique_ptr<worker_steps> steps;
  worker_options opts;
  bool failing = false;
  int64_t last_sweep_ms = 0;
  uint64_t gen = 0;          ///< of the pending timer; older ticks are ignored
  int64_t timer_at = never;  ///< when the pending timer fires (never: none)
  bool timer_is_due = false; ///< the pending timer is for a row known to be due then

  ~worker_state() {
    if (opts.stats)
      opts.stats->workers.fetch_sub(1, std::memory_order_relaxed);
  }
};

/// How often a worker deletes its shard's stale parked rows (never due, so never seen).
constexpr int64_t sweep_every_ms = 60'000;

/// What a worker handles: its interface and its timer (tick, carrying the generation of the
/// timer: an older one is ignored).
using worker_impl = worker_actor::extend<caf::reacts_to<tick_atom, uint64_t>>;

/// What the poller handles: its interface and its period.
using poller_impl = poller_actor::extend<caf::reacts_to<tick_atom>>;

using stateful = worker_impl::stateful_pointer<worker_state>;

/// Replaces the pending timer: a tick in `delay_ms` (at once when <= 0).
void arm(stateful self, int64_t delay_ms) {
  auto& s = self->state;
  ++s.gen;
  s.timer_is_due = false;
  s.timer_at = s.opts.clock_ms() + std::max<int64_t>(delay_ms, 0);
  if (delay_ms <= 0)
    self->send(self, tick_atom_v, s.gen);
  else
    self->delayed_send(self, std::chrono::milliseconds{delay_ms}, tick_atom_v, s.gen);
}

/// Looks at the shard; runs an iteration when there is work, else sleeps until the next due
/// row (with a poller) or at most the poll period (without). `due` (a timer set for a row
/// known to be due now): fire at once, the look comes after.
void run(stateful self, bool due) {
  auto& s = self->state;
  s.timer_at = never;
  auto poll = s.opts.poll.count();
  auto trouble = [&](const caf::error& err) {
    if (s.opts.stats)
      s.opts.stats->step_failures.fetch_add(1, std::memory_order_relaxed);
    if (!s.failing)
      lg->warn("scheduled worker shard={} step failed error={}; retrying every {} ms", s.opts.shard,
               persistence::error_message(err), poll);
    s.failing = true;
    arm(self, poll);
  };
  bool incoming = false;
  if (!due) {
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
      auto wait = s.opts.poller ? never : poll;
      bool for_due = false;
      if (look->next_due && *look->next_due - now <= wait) {
        wait = *look->next_due - now;
        for_due = true;
      }
      if (auto sweep_in = s.last_sweep_ms + sweep_every_ms - now; sweep_in < wait) {
        wait = sweep_in;
        for_due = false;
      }
      arm(self, wait);
      s.timer_is_due = for_due;
      return;
    }
    incoming = look->incoming;
  }
  auto it = s.steps->iterate(s.opts.fire, incoming ? s.opts.batch : 0, s.opts.batch);
  if (!it)
    return trouble(it.error());
  if (auto* st = s.opts.stats.get()) {
    st->fired.fetch_add(static_cast<uint64_t>(it->fired), std::memory_order_relaxed);
    st->failed.fetch_add(static_cast<uint64_t>(it->failed), std::memory_order_relaxed);
    st->recounted.fetch_add(static_cast<uint64_t>(it->recounted), std::memory_order_relaxed);
    st->moved.fetch_add(static_cast<uint64_t>(it->moved), std::memory_order_relaxed);
    st->dropped.fetch_add(static_cast<uint64_t>(it->dropped), std::memory_order_relaxed);
  }
  if (s.failing)
    lg->info("scheduled worker shard={} steps work again", s.opts.shard);
  s.failing = false;
  if (it->fenced) {
    lg->info("scheduled worker shard={} epoch={} fenced: the lease moved on; stopping",
             s.opts.shard, s.opts.epoch);
    self->quit();
    return;
  }
  // Look again at once: the batch may have been full, or the next row is due already; rows
  // locked by another step: do not spin.
  arm(self, it->moved + it->dropped + it->fired + it->failed == 0 ? 1 : 0);
}

worker_impl::behavior_type worker(stateful self, worker_options opts) {
  if (!opts.clock_ms)
    opts.clock_ms = system_ms;
  if (opts.stats) {
    opts.stats->workers.fetch_add(1, std::memory_order_relaxed);
    // The lag of a first attempt: how late after its occurrence the worker fires it.
    opts.fire = [fire = std::move(opts.fire), stats = opts.stats,
                 clock = opts.clock_ms](const attempt& a) {
      if (a.number == 1 && !a.run_now)
        stats->lag.record(
          std::chrono::milliseconds{std::max<int64_t>(0, clock() - a.scheduled_at_ms)});
      return fire(a);
    };
  }
  auto& st = self->state;
  st.opts = opts;
  st.steps = std::make_unique<worker_steps>(
    *opts.pool, persistence::scheduled_lease{opts.shard, opts.epoch, opts.node}, opts.rules,
    opts.clock_ms);
  st.steps->set_node(opts.node);
  if (opts.watch) {
    self->monitor(opts.watch);
    self->set_down_handler([self](caf::down_msg&) { self->quit(); });
  }
  if (opts.poller)
    self->send(opts.poller, poll_atom_v, opts.shard, caf::actor_cast<worker_actor>(self));
  arm(self, 0); // the first look
  return {
    [self](tick_atom, uint64_t gen) {
      if (gen == self->state.gen)
        run(self, self->state.timer_is_due);
    },
    [self](wake_atom, int64_t next_due, bool incoming) {
      auto& s = self->state;
      auto now = s.opts.clock_ms();
      if (incoming || (next_due >= 0 && next_due <= now)) {
        if (s.timer_at > now)
          arm(self, 0);
      } else if (next_due >= 0 && next_due < s.timer_at) {
        arm(self, next_due - now);
        s.timer_is_due = true; // incoming rows would have been said
      }
    },
  };
}

struct poller_state {
  static inline const char* name = "gost.scheduled.poller";
  using clock = std::chrono::steady_clock;
  persistence::pg_pool* pool = nullptr;
  std::chrono::milliseconds poll{100};
  std::unordered_map<uint32_t, worker_actor> workers; ///< by shard
  bool failing = false;
  std::optional<backoff> idle;   ///< the wait after a read that woke nobody
  clock::time_point next_read{}; ///< its timer is set for then; earlier ticks are older ones
  clock::time_point last_read{};
};

using poller_ptr = poller_impl::stateful_pointer<poller_state>;

/// Sets the next read `wait` from now, unless one is set earlier.
void read_in(poller_ptr self, std::chrono::milliseconds wait) {
  auto& s = self->state;
  auto at = poller_state::clock::now() + wait;
  if (s.next_read > poller_state::clock::now() && s.next_read <= at)
    return;
  s.next_read = at;
  self->delayed_send(self, wait, tick_atom_v);
}

/// One read over the registered shards; the next in `poll` when it woke a worker, else after
/// the idle back-off's wait. Returns that wait.
std::chrono::milliseconds read_shards(poller_ptr self) {
  auto& s = self->state;
  s.last_read = poller_state::clock::now();
  if (s.workers.empty())
    return s.idle->next();
  std::vector<uint32_t> shards;
  for (auto& w : s.workers)
    shards.push_back(w.first);
  auto looks = persistence::look_at_shards(*s.pool, shards);
  if (!looks) {
    if (!s.failing)
      lg->warn("scheduled poller: reading the shards failed error={}; retrying every {} ms",
               persistence::error_message(looks.error()), s.poll.count());
    s.failing = true;
    return s.poll;
  }
  s.failing = false;
  // Due before the next read (at the busy pace, or the idle wait if nobody is woken): the
  // worker arms its timer for it (it may know already).
  auto now_ms = system_ms();
  bool woke = false;
  for (size_t i = 0; i < shards.size(); ++i) {
    auto& l = (*looks)[i];
    if (l.incoming || (l.next_due && *l.next_due <= now_ms + s.poll.count()))
      woke = true;
  }
  auto wait = s.poll;
  if (woke)
    s.idle->reset();
  else
    wait = s.idle->next();
  auto horizon = now_ms + wait.count();
  for (size_t i = 0; i < shards.size(); ++i) {
    auto& l = (*looks)[i];
    if (l.incoming || (l.next_due && *l.next_due <= horizon))
      self->send(s.workers[shards[i]], wake_atom_v, l.next_due.value_or(-1), l.incoming);
  }
  return wait;
}

poller_impl::behavior_type poller(poller_ptr self, persistence::pg_pool* pool,
                                  std::chrono::milliseconds poll,
                                  std::chrono::milliseconds poll_idle) {
  self->state.pool = pool;
  self->state.poll = poll;
  self->state.idle.emplace(poll, std::max(poll, poll_idle));
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& ws = self->state.workers;
    for (auto i = ws.begin(); i != ws.end();)
      i = i->second.address() == dm.source ? ws.erase(i) : std::next(i);
  });
  read_in(self, poll);
  return {
    [self](poll_atom, uint32_t shard, worker_actor w) {
      self->monitor(w);
      self->state.workers[shard] = std::move(w); // a newer worker of the shard replaces one
      self->state.idle->reset();
      read_in(self, self->state.poll); // its shard's first look is the worker's own
    },
    [self](wake_atom, uint32_t) {
      // Actions were created or changed for a shard: read now, or a poll period after the
      // last read (a stream of creations makes one read per period).
      auto& s = self->state;
      s.idle->reset();
      auto since = poller_state::clock::now() - s.last_read;
      auto wait = since >= s.poll ? std::chrono::milliseconds{0}
                                  : std::chrono::ceil<std::chrono::milliseconds>(s.poll - since);
      read_in(self, wait);
    },
    [self](tick_atom) {
      auto& s = self->state;
      if (poller_state::clock::now() < s.next_read)
        return; // an older timer: a later one is set for the read now planned
      s.next_read = {};
      read_in(self, read_shards(self));
    },
  };
}

} // namespace

worker_actor spawn_worker(caf::actor_system& sys, worker_options opts) {
  return sys.spawn<caf::detached>(worker, std::move(opts));
}

poller_actor spawn_poller(caf::actor_system& sys, persistence::pg_pool& pool,
                          std::chrono::milliseconds poll, std::chrono::milliseconds poll_idle) {
  return sys.spawn<caf::detached>(poller, &pool, poll, poll_idle);
}

} // namespace gost::scheduled
