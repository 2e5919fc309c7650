// The shard supervisor: owns the offer actors of one shard and schedules its stage queues.
//
// - Offer actors are spawned on the first event for an offer, neither linked nor monitored
//   (see spawn_offer_actor): each reports its own stop (`stopped`), and the shard forgets it
//   then; an actor that stops without being passivated crashed. API events are
//   forwarded with `delegate` (the offer actor answers the original requester directly).
// - Passivation: a sweep every idle_timeout/4 stops actors idle for idle_timeout, and the
//   resident cap stops the least recently used one before a new one is spawned.
// - Stage work: the shard keeps the queue entries due within `queue_lookahead` in memory
//   (stage_scheduler), polls PostgreSQL for more every `queue_poll` (one page at a time, never
//   the whole table), learns about new entries from the offer actors that committed them, and
//   hands due entries to offer actors within each stage's limits. A failed run is retried with
//   the stage's back-off; after `max_attempts` it is dead-lettered. A run that failed as
//   unavailable (the stage's service or the database is down) is retried with a back-off that
//   doubles per consecutive such failure of the stage (up to 32x) and never dead-letters.
// - The shard spawns its write-behind writer (linked, detached) and passes it to every offer
//   actor, so all writes of the shard go through one writer, in order.

#include <algorithm>
#include <limits>
#include <random>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <caf/actor_system.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/system_messages.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include "gost/core/errc.hpp"
#include "gost/core/routing.hpp"
#include "gost/offers/spawn.hpp"
#include "gost/offers/stage_runner.hpp"
#include "offer_actor.hpp"
#include "gost/core/detail/resident_set.hpp"
#include "stage_scheduler.hpp"
#include "writer_actor.hpp"

namespace gost {

namespace {

using shard_impl = shard_actor::extend<caf::reacts_to<wake_atom>, caf::reacts_to<poll_atom>,
                                       caf::reacts_to<rescan_atom>, caf::reacts_to<sweep_atom>>;

struct shard_state {
  static inline const char* name = "gost.shard";
  shard_options opts;
  writer_actor writer;
  std::unique_ptr<stage_scheduler> sched;
  /// What the shard's offer actors share (shard, handles, stages, stats, run context).
  detail::offer_env_ptr env;
  /// Resident offer actors in LRU order, with when the shard last handed each an event (the
  /// idle sweep walks from the least recently used).
  detail::resident_set<offer_actor> residents;
  std::map<std::pair<std::string, std::string>, int> attempts;
  /// Consecutive runs per stage that failed as unavailable (back-off exponent).
  std::map<std::string, int> unavailable_streak;
  int64_t wake_at_us = 0;
  /// Entries finished while a poll was in flight: the poll may have read them before their
  /// commit, and must not bring them back.
  bool polling = false;
  std::set<std::pair<std::string, std::string>> done_during_poll;
  /// Where the next poll continues: the last entry read (empty: from the start). Entries
  /// committed behind it by this shard are learned from the commits; a full scan from the
  /// start every `full_scan_every` catches anything else.
  queue_entries cursor;
  std::chrono::steady_clock::time_point last_full_scan{};
  bool poll_timer_pending = false;
  bool more_waiting = false; ///< the last poll filled its page: PostgreSQL holds more due work
  uint64_t rescans_done = 0;
  /// Draining for a hand-off: no new work; answered and stopped once no offer actor is left.
  bool draining = false;
  caf::typed_response_promise<ok_atom> drained;
  /// Passivated offer actors (CAF ids) until they report stopping: they may still be finishing
  /// events.
  std::unordered_set<caf::actor_id> stopping;

  /// Offer actors are neither linked nor monitored: a stopping shard (for any reason) takes them
  /// along here. Their durable state is in PostgreSQL; an unfinished event is redone later.
  ~shard_state() {
    residents.for_each([](const std::string&, const offer_actor& a) {
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    });
  }
};

constexpr auto full_scan_every = std::chrono::seconds{30};

using self_ptr = shard_impl::stateful_pointer<shard_state>;

int64_t now_us() { return to_us(stage_clock::now()); }

void passivate(self_ptr self, const std::string& id);

offer_actor child(self_ptr self, const std::string& id) {
  auto& st = self->state;
  auto now = std::chrono::steady_clock::now();
  if (auto* a = st.residents.use(id, now))
    return *a;
  // The cap: make room by passivating the least recently used actor.
  while (st.residents.size() >= std::max<size_t>(1, st.opts.max_resident) && !st.residents.empty())
    passivate(self, *st.residents.oldest_id());
  auto a = detail::spawn_offer_actor(self, id, st.env);
  st.residents.add(id, a, now);
  st.opts.stats->offer_actors_spawned.fetch_add(1, std::memory_order_relaxed);
  st.opts.stats->resident_offer_actors.fetch_add(1, std::memory_order_relaxed);
  return a;
}

void dispatch(self_ptr self);
void poll(self_ptr self);

/// While draining: once every offer actor is gone (each finished and committed what it had),
/// answer the drain request and stop, taking the writer along.
void check_drained(self_ptr self) {
  auto& st = self->state;
  if (!st.draining || !st.residents.empty() || !st.stopping.empty() || !st.drained.pending())
    return;
  spdlog::info("shard drained shard={}", st.opts.shard);
  st.drained.deliver(ok_atom_v);
  self->quit(caf::exit_reason::user_shutdown);
}

caf::error moved_error(self_ptr self) {
  return make_error(errc::moved,
                                    "shard " + std::to_string(self->state.opts.shard)
                                      + " is moving to another node");
}

/// Stops an offer actor gracefully: forgotten here first, then told; everything forwarded to
/// it before is still in its mailbox and handled before it stops.
void passivate(self_ptr self, const std::string& id) {
  auto& st = self->state;
  auto a = st.residents.remove(id); // its stopped message then finds nothing to forget
  if (!a)
    return;
  st.opts.stats->resident_offer_actors.fetch_sub(1, std::memory_order_relaxed);
  st.stopping.insert(a.id());
  st.opts.stats->offer_actors_passivated.fetch_add(1, std::memory_order_relaxed);
  self->send(a, passivate_atom_v, ok_atom_v);
}

/// The idle sweep: passivates, least recently used first, every offer actor the shard has not
/// handed an event for `offer_idle_timeout`. One timer per shard instead of one per actor.
void sweep_idle(self_ptr self) {
  auto& st = self->state;
  auto cutoff = std::chrono::steady_clock::now() - st.opts.offer_idle_timeout;
  while (!st.residents.empty() && st.residents.oldest_last_used() <= cutoff)
    passivate(self, *st.residents.oldest_id());
}

std::chrono::milliseconds sweep_interval(const shard_options& o) {
  return std::clamp(o.offer_idle_timeout / 4, std::chrono::milliseconds{5},
                    std::chrono::milliseconds{10'000});
}

/// An entry is finished (committed or dead-lettered): free its slot.
void finished(self_ptr self, const std::string& stage_id, const std::string& offer_id) {
  auto& st = self->state;
  st.sched->done(stage_id, offer_id);
  if (st.polling)
    st.done_during_poll.emplace(stage_id, offer_id);
  else if (st.more_waiting && st.sched->known() < st.opts.queue_page / 2)
    poll(self); // keep the in-memory queue fed while a backlog waits in PostgreSQL
}

void schedule_poll(self_ptr self) {
  auto& st = self->state;
  if (st.poll_timer_pending)
    return;
  st.poll_timer_pending = true;
  self->delayed_send(self, st.opts.queue_poll, poll_atom_v);
}

/// Adds committed or loaded entries that are due within the lookahead window; later ones are
/// found by a later poll.
void learn(self_ptr self, const queue_entries& entries) {
  auto& st = self->state;
  auto horizon = now_us() + std::chrono::duration_cast<std::chrono::microseconds>(st.opts.queue_lookahead).count();
  queue_entries near;
  for (auto& e : entries)
    if (e.due_at_us <= horizon)
      near.push_back(e);
  if (!near.empty() && st.sched->add(near) > 0)
    dispatch(self);
}

int64_t prefetch_us(const shard_options& o) {
  return std::chrono::duration_cast<std::chrono::microseconds>(o.queue_prefetch).count();
}

void schedule_wakeup(self_ptr self) {
  auto& st = self->state;
  auto due = st.sched->next_due();
  if (st.opts.queue_prefetch.count() > 0) {
    auto warm = st.sched->next_warm_due();
    if (warm != std::numeric_limits<int64_t>::max())
      due = std::min(due, warm - prefetch_us(st.opts));
  }
  if (due == std::numeric_limits<int64_t>::max())
    return;
  if (st.wake_at_us != 0 && st.wake_at_us <= due)
    return;
  st.wake_at_us = due;
  auto wait = std::max<int64_t>(0, due - now_us());
  self->delayed_send(self, std::chrono::microseconds{wait}, wake_atom_v);
}

void dead_letter(self_ptr self, const std::string& stage_id, const std::string& offer_id,
                 int attempts, const std::string& reason) {
  auto& st = self->state;
  persistence::write_set ws;
  ws.offer_id = offer_id;
  ws.op = persistence::offer_op::none;
  ws.dequeue.push_back(stage_id);
  ws.dead_letters.push_back({stage_id, reason, attempts});
  spdlog::error("dead letter shard={} offer={} stage={} attempts={} reason={}", st.opts.shard,
                offer_id, stage_id, attempts, reason);
  self->request(st.writer, caf::infinite, write_atom_v, std::move(ws))
    .then(
      [=](persistence::write_outcome) {
        self->state.opts.stats->dead_letters.fetch_add(1, std::memory_order_relaxed);
        finished(self, stage_id, offer_id);
        dispatch(self);
      },
      [=](caf::error& err) {
        // Not recorded: the entry stays queued in PostgreSQL and is found again by a poll.
        spdlog::warn("dead letter not written shard={} offer={} stage={} error={}",
                     self->state.opts.shard, offer_id, stage_id, persistence::error_message(err));
        finished(self, stage_id, offer_id);
      });
}

void start_run(self_ptr self, stage_scheduler::work w) {
  auto target = child(self, w.offer_id);
  auto t0 = std::chrono::steady_clock::now();
  // No timeout (a timeout is a clock entry per run): an offer actor that dies answers with
  // an error through CAF, and one that lives finishes its event.
  self->request(target, caf::infinite, run_atom_v, w.stage_id)
    .then(
      [=](queue_entries& committed) {
        auto& st = self->state;
        if (auto* m = st.opts.stats->stage(w.stage_id))
          m->run.record(std::chrono::duration_cast<std::chrono::microseconds>(
            std::chrono::steady_clock::now() - t0));
        st.attempts.erase({w.stage_id, w.offer_id});
        st.unavailable_streak.erase(w.stage_id);
        finished(self, w.stage_id, w.offer_id);
        learn(self, committed);
        dispatch(self);
      },
      [=](caf::error& err) {
        auto& st = self->state;
        if (err == errc::fenced) {
          spdlog::error("shard lease lost shard={}; stopping the shard", st.opts.shard);
          self->quit(err);
          return;
        }
        auto* entry = st.opts.stages->find(w.stage_id);
        auto backoff = entry != nullptr ? entry->opts.retry_backoff : std::chrono::milliseconds{1000};
        auto reason = persistence::error_message(err);
        if (classify(err) == disposition::retry) {
          // A service the stage needs (or the database) is down: not this offer's fault. No
          // attempt is counted; the back-off grows with the stage's streak of such failures.
          auto streak = std::min(++st.unavailable_streak[w.stage_id], 6);
          auto wait = backoff * (1 << (streak - 1));
          spdlog::warn("stage unavailable shard={} offer={} stage={} retry_in_ms={} error={}",
                       st.opts.shard, w.offer_id, w.stage_id, wait.count(), reason);
          st.sched->retry(w.stage_id, w.offer_id,
                          now_us() + std::chrono::duration_cast<std::chrono::microseconds>(wait).count());
          dispatch(self);
          return;
        }
        auto key = std::make_pair(w.stage_id, w.offer_id);
        auto n = ++st.attempts[key];
        if (n >= st.opts.max_attempts) {
          st.attempts.erase(key);
          dead_letter(self, w.stage_id, w.offer_id, n, reason);
          return;
        }
        spdlog::warn("stage run failed shard={} offer={} stage={} attempt={} error={}",
                     st.opts.shard, w.offer_id, w.stage_id, n, reason);
        st.sched->retry(w.stage_id, w.offer_id,
                        now_us() + std::chrono::duration_cast<std::chrono::microseconds>(backoff).count() * n);
        dispatch(self);
      });
}

void dispatch(self_ptr self) {
  auto& st = self->state;
  if (st.draining)
    return;
  auto now = now_us();
  if (st.opts.queue_prefetch.count() > 0)
    for (auto& id : st.sched->take_warm(now, now + prefetch_us(st.opts)))
      self->send(child(self, id), warm_atom_v);
  for (auto& w : st.sched->take(now))
    start_run(self, std::move(w));
  schedule_wakeup(self);
}

void poll(self_ptr self) {
  auto& st = self->state;
  if (st.polling || st.draining)
    return;
  // Memory bound: hold at most about a page of entries; the rest waits in PostgreSQL.
  if (st.sched->known() >= st.opts.queue_page) {
    schedule_poll(self);
    return;
  }
  auto now = std::chrono::steady_clock::now();
  if (now - st.last_full_scan >= full_scan_every) {
    st.cursor.clear();
    st.last_full_scan = now;
  }
  auto until = now_us() + std::chrono::duration_cast<std::chrono::microseconds>(st.opts.queue_lookahead).count();
  st.polling = true;
  st.done_during_poll.clear();
  auto room = static_cast<uint32_t>(st.opts.queue_page - st.sched->known());
  self->request(st.opts.store, std::chrono::seconds{30}, due_atom_v, st.opts.shard, until,
                room, st.cursor)
    .then(
      [=](queue_entries& entries) {
        auto& s = self->state;
        s.polling = false;
        if (!entries.empty())
          s.cursor.assign(1, entries.back());
        if (!s.done_during_poll.empty()) {
          entries.erase(std::remove_if(entries.begin(), entries.end(),
                                       [&](const persistence::queue_entry& e) {
                                         return s.done_during_poll.count({e.stage_id, e.offer_id}) != 0;
                                       }),
                        entries.end());
          s.done_during_poll.clear();
        }
        s.more_waiting = entries.size() >= room;
        s.sched->add(entries);
        dispatch(self);
        schedule_poll(self);
      },
      [=](caf::error& err) {
        self->state.polling = false;
        self->state.done_during_poll.clear();
        spdlog::warn("queue poll failed shard={} error={}", self->state.opts.shard,
                     persistence::error_message(err));
        schedule_poll(self);
      });
}

/// One page of the background rescan: ask every stage about each offer (as the seed's
/// "external change" does, but at background priority) and enqueue those that want it. The
/// next page starts when this page's entries are committed, so a rescan never floods the
/// writer.
void rescan_page(self_ptr self, std::string after) {
  auto& st = self->state;
  self->request(st.opts.store, std::chrono::seconds{60}, scan_atom_v, st.opts.shard, after,
                st.opts.rescan_page)
    .then(
      [=](offer_snapshots& page) {
        auto& s = self->state;
        if (page.empty()) {
          ++s.rescans_done;
          spdlog::info("background rescan done shard={}", s.opts.shard);
          self->delayed_send(self, s.opts.rescan_every, rescan_atom_v);
          return;
        }
        auto now = now_us();
        auto last = page.back().offer.id();
        auto full = page.size() >= s.opts.rescan_page;
        std::vector<persistence::write_set> sets;
        for (auto& snap : page) {
          offer_context ctx;
          for (auto& stored : snap.states) {
            auto& held = ctx.states[stored.stage_id];
            held.value.ParseFromString(stored.bytes);
            held.version = stored.version;
          }
          for (auto& e : snap.queued)
            if (e.due_at_us <= now)
              ctx.queued_now.insert(e.stage_id);
          auto wanted = ask_stages(*s.opts.stages, nullptr, snap.offer, ctx, {}, now,
                                   persistence::priority::background);
          if (wanted.empty())
            continue;
          persistence::write_set ws;
          ws.offer_id = snap.offer.id();
          ws.op = persistence::offer_op::none;
          ws.enqueue = std::move(wanted);
          sets.push_back(std::move(ws));
        }
        auto pending = std::make_shared<size_t>(sets.size());
        auto next = [=] {
          if (full) {
            rescan_page(self, last);
          } else {
            ++self->state.rescans_done;
            spdlog::info("background rescan done shard={}", self->state.opts.shard);
            self->delayed_send(self, self->state.opts.rescan_every, rescan_atom_v);
          }
        };
        if (sets.empty()) {
          next();
          return;
        }
        for (auto& ws : sets) {
          auto entries = ws.enqueue;
          self->request(s.writer, caf::infinite, write_atom_v, std::move(ws))
            .then(
              [=](persistence::write_outcome out) {
                if (out == persistence::write_outcome::committed)
                  learn(self, entries);
                if (--*pending == 0)
                  next();
              },
              [=](caf::error& err) {
                spdlog::warn("background rescan write failed shard={} error={}",
                             self->state.opts.shard, persistence::error_message(err));
                if (--*pending == 0)
                  next();
              });
        }
      },
      [=](caf::error& err) {
        spdlog::warn("background rescan failed shard={} error={}; retrying later",
                     self->state.opts.shard, persistence::error_message(err));
        self->delayed_send(self, self->state.opts.rescan_every, rescan_atom_v);
      });
}

shard_impl::behavior_type shard_fun(self_ptr self, shard_options opts) {
  auto& st = self->state;
  st.opts = std::move(opts);
  st.sched = std::make_unique<stage_scheduler>(*st.opts.stages, st.opts.background_share);
  detail::writer_args wa;
  wa.pool = st.opts.pool;
  wa.shard = st.opts.shard;
  wa.epoch = st.opts.epoch;
  wa.max_batch = st.opts.write_batch_max;
  wa.flush_delay = st.opts.write_flush_delay;
  wa.stats = st.opts.stats;
  st.writer = detail::spawn_writer(self, wa);
  auto env = caf::make_counted<detail::offer_env>();
  env->shard = st.opts.shard;
  env->parent = self->address(); // weak: the shard's state holds the environment
  env->store = st.opts.store;
  env->writer = st.writer;
  env->stages = st.opts.stages;
  env->pools = st.opts.pools;
  env->stats = st.opts.stats;
  env->max_chain = st.opts.max_chain;
  env->run = std::make_shared<const run_context>(
    run_context{st.opts.node_id, st.opts.shard, st.opts.epoch}); // what stages see
  st.env = std::move(env);
  // The writer is linked to its shard: any exit message (the node stopping the shard, the
  // writer dying) stops the shard. Offer actors report their own stop (stopped_atom).
  self->set_exit_handler([=](caf::exit_msg& em) { self->quit(em.reason); });
  self->delayed_send(self, sweep_interval(st.opts), sweep_atom_v);
  if (!st.opts.stages->all().empty()) {
    self->send(self, poll_atom_v);
    if (st.opts.rescan_every.count() > 0)
      self->delayed_send(self, st.opts.rescan_every, rescan_atom_v);
  }
  // Every offer operation: spawn the offer's actor if needed and hand the request over (the
  // actor answers the requester directly).
  auto forward = [=](auto tag, auto&... xs) -> typename decltype(tag)::result_type {
    if (self->state.draining)
      return moved_error(self);
    return self->delegate(child(self, entity_id_of(xs...)), std::move(xs)...);
  };
  return make_behavior<shard_impl::behavior_type>(
    make_handlers<offer_ops::signatures>(forward),
    [=](drain_atom) -> caf::result<ok_atom> {
      auto& s = self->state;
      s.draining = true;
      s.drained = self->make_response_promise<ok_atom>();
      auto rp = s.drained;
      spdlog::info("shard draining shard={} resident={}", s.opts.shard, s.residents.size());
      std::vector<std::string> ids;
      s.residents.for_each([&](const std::string& id, const offer_actor&) { ids.push_back(id); });
      for (auto& id : ids)
        passivate(self, id);
      // Passivated actors are forgotten at once; their stopped messages follow.
      check_drained(self);
      return rp;
    },
    [=](enqueued_atom, const queue_entries& entries) { learn(self, entries); },
    [=](stopped_atom, const std::string& id, uint64_t aid) {
      auto& s = self->state;
      if (s.stopping.erase(aid) == 0) {
        // Not passivated, yet gone: a handler threw (logged by the actor with the error) or
        // someone killed it. Forgotten unless a newer actor for the offer took its place; the
        // next event for the offer starts a new one.
        auto* a = s.residents.find(id);
        if (a != nullptr && a->id() == aid) {
          s.opts.stats->offer_actors_crashed.fetch_add(1, std::memory_order_relaxed);
          spdlog::warn("offer actor stopped unexpectedly shard={} offer={}", s.opts.shard, id);
          s.residents.remove(id);
          s.opts.stats->resident_offer_actors.fetch_sub(1, std::memory_order_relaxed);
        }
      }
      check_drained(self);
    },
    [=](get_atom, resident_atom, const std::string& id) -> offer_actor {
      auto* actor = self->state.residents.find(id);
      return actor != nullptr ? *actor : offer_actor{};
    },
    [=](resident_atom, const std::string& id) -> caf::result<bool, int64_t> {
      auto* actor = self->state.residents.find(id);
      if (actor == nullptr)
        return {false, int64_t{-1}};
      // An actor inside an event answers after it: wait a second at most.
      auto rp = self->make_response_promise<bool, int64_t>();
      self->request(*actor, std::chrono::seconds{1}, mailbox_atom_v)
        .then([rp](uint64_t n) mutable { rp.deliver(true, static_cast<int64_t>(n)); },
              [rp](caf::error&) mutable { rp.deliver(true, int64_t{-1}); });
      return rp;
    },
    [=](wake_atom) {
      self->state.wake_at_us = 0;
      dispatch(self);
    },
    [=](rescan_atom) { rescan_page(self, std::string{}); },
    [=](sweep_atom) {
      sweep_idle(self);
      self->delayed_send(self, sweep_interval(self->state.opts), sweep_atom_v);
    },
    [=](poll_atom) {
      self->state.poll_timer_pending = false;
      poll(self);
    });
}

} // namespace

shard_actor spawn_shard(caf::actor_system& sys, shard_options opts) {
  return caf::actor_cast<shard_actor>(sys.spawn(shard_fun, std::move(opts)));
}

std::shared_ptr<const stage_pools> spawn_stage_pools(caf::actor_system& sys,
                                                    const stage_registry& reg) {
  auto out = std::make_shared<stage_pools>();
  for (auto& e : reg.all()) {
    if (!e.opts.blocking)
      continue;
    pool_options po;
    po.name = "stage." + e.id;
    po.workers = std::max(1, e.opts.pool_workers);
    po.queue_capacity = e.opts.pool_queue;
    po.rate_limit = e.opts.pool_rate_limit;
    out->emplace(e.id, spawn_pool(sys, po));
  }
  return out;
}

std::string make_offer_id() {
  thread_local std::mt19937_64 gen{std::random_device{}()};
  static const char* hex = "0123456789abcdef";
  std::string out(32, '0');
  for (int half = 0; half < 2; ++half) {
    auto bits = gen();
    for (int i = 0; i < 16; ++i) {
      out[static_cast<size_t>(half * 16 + i)] = hex[bits & 0xf];
      bits >>= 4;
    }
  }
  return out;
}

} // namespace gost
