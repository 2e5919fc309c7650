#pragma once
// The entity kit's shard supervisor, generic over a kind of entity (offers, tasks, ...): what
// every actor type of gost shares, written once.
//
// - Entity actors are spawned on the first request for an entity, neither linked nor
//   monitored: each reports its own stop (`stopped`), and the shard forgets it then; an actor
//   that stops without being passivated crashed (counted, logged). Requests are forwarded with
//   `delegate` (the entity actor answers the requester directly) by one generic handler per
//   operation of the kind's interface.
// - Passivation: a sweep every idle_timeout/4 stops actors idle for idle_timeout, and the
//   resident cap stops the least recently used one before a new one is spawned.
// - Durable queues: the shard keeps the entries due within `queue_lookahead` in memory
//   (lane_scheduler), polls PostgreSQL for more every `queue_poll` (a page at a time behind a
//   cursor, never the whole table), learns about new entries from the entity actors that
//   committed them, and hands due entries to entity actors (`run`) within each lane's limits.
//   An idle shard sleeps: a poll that finds nothing doubles the wait before the next, up to
//   `queue_poll_idle` (a slow safety poll), but the shard polls again in time for the next
//   entry it knows of beyond the window (the store answers the first one past it with each
//   poll, and the entries its actors commit are learned), and at once when told that entries
//   were written behind its back (`enqueued` with no entries: another node's requeue or
//   event, through the node's wake channel); a poll that finds work due now resets the pace.
//   A failed poll waits (`retry_pace`: doubling up to `queue_poll_cap`, over as soon as the
//   database is seen back); a database outage is logged by its tracker, not by each shard.
//   Failed runs go through retry_policy: retried with back-off, dead-lettered after the
//   attempts (written through the kind's writer), never dead-lettered for outages.
// - Drain (graceful hand-off): no new work (requests get errc::moved), every entity actor
//   finishes what it has (committed), then the shard answers and stops. Bounded by
//   `drain_timeout`: the actors still running then are cut (told to stop with a kill, which
//   one inside an await takes when the await ends; logged with their ids, counted as
//   drain_cut) and the shard answers anyway; fencing refuses what they might still write, and
//   the next owner redoes their unfinished work from PostgreSQL.
// - A run that fails with errc::fenced means this node lost the lease: the shard stops.
//
// A kind plugs in with a traits struct:
//
//   struct my_kind {
//     using ops = my_ops;                        // requests routed by entity id
//     using actor = kit::entity_actor<my_ops>;   // ops + the kit's entity interface
//     using shard = kit::shard_actor<my_ops, actor /*, extra signatures... */>;
//     using write_set = ...;                     // what its writer commits
//     using env = ...;                           // derives from kit::entity_env<write_set>
//     static constexpr const char* name = "my";  // logs and metrics
//     static actor spawn_entity(caf::local_actor* shard, std::string id, caf::intrusive_ptr<env>);
//     static write_set dead_letter(const std::string& lane, const std::string& id, int attempts,
//                                  const std::string& reason);
//     template <class Self> static auto extra_handlers(Self self);  // std::tuple<> when none
//     template <class Self> static void on_start(Self self);        // timers of its own
//   };

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <caf/actor_addr.hpp>
#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/intrusive_ptr.hpp>
#include <caf/ref_counted.hpp>
#include <caf/scheduled_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/system_messages.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "gost/core/backoff.hpp"
#include "gost/core/dependency.hpp"
#include "gost/core/detail/resident_set.hpp"
#include "gost/core/errc.hpp"
#include "gost/core/kit/lane_scheduler.hpp"
#include "gost/core/kit/protocol.hpp"
#include "gost/core/kit/retry_policy.hpp"
#include "gost/core/kit/trail.hpp"
#include "gost/core/kit/writer.hpp"
#include "gost/core/protocol.hpp"
#include "gost/core/routing.hpp"
#include "gost/core/stats.hpp"
#include "gost/persistence/queue.hpp"

namespace gost::kit {

/// A wall clock in microseconds since the Unix epoch. The kit's shards and entity actors read
/// the time through the one their shard_config names (tests put the test scheduler's there:
/// gost/testing/caf_fixture.hpp).
using wall_clock_fn = std::function<int64_t()>;

/// What the entity actors of one shard share, the kit's part: a kind's environment derives
/// from it and adds its own (stores, stages, ...). One copy per shard, held by intrusive
/// pointer from each actor (8 bytes per resident actor).
template <class WriteSet>
struct entity_env : caf::ref_counted {
  uint32_t shard = 0;
  int64_t epoch = 0; ///< every write of the shard is fenced with it
  /// The shard, weakly: the shard's own state holds this environment (a strong handle here
  /// would keep the shard alive through itself if its state were never destroyed).
  caf::actor_addr parent;
  writer_actor<WriteSet> writer;
  /// The shard's wall clock (shard_config::wall_clock), set when the shard starts.
  wall_clock_fn wall_clock;
  /// The shard's own figures (shard_config::figures): entity actors add their mailbox depth.
  std::shared_ptr<shard_stats> figures;
  /// The node's live traces (shard_config::trace); may be null.
  std::shared_ptr<trace_hub> trace;
  /// Events each entity actor keeps for the console (shard_config::recent_events).
  uint16_t recent_events = 0;

  /// Now, by the shard's wall clock: entity actors read the time here, not from the system.
  int64_t now_us() const { return wall_clock ? wall_clock() : kit::now_us(); }
};

/// Tells the shard of `env` that an entity actor stopped (call from the actor state's
/// destructor: it runs whatever the reason).
template <class Env>
void report_stopped(const Env& env, const std::string& id, caf::actor_id aid) {
  if (auto shard = caf::actor_cast<caf::actor>(env.parent))
    caf::anon_send(shard, stopped_atom_v, id, static_cast<uint64_t>(aid));
}

/// Counts an entity actor's mailbox into its shard's figures: `reported` is what the actor
/// counted last (kept by the actor), `now` what its mailbox holds now. Call at the end of each
/// of the actor's turns (with 0 as it stops): the shard's figure is then the sum over its
/// actors, and nobody ever walks the actors or reads a mailbox to get it.
template <class Env>
void report_mailbox(const Env& env, uint32_t& reported, size_t now) {
  auto n = static_cast<uint32_t>(std::min<size_t>(now, std::numeric_limits<uint32_t>::max()));
  if (n == reported || !env.figures)
    return;
  env.figures->mailbox.fetch_add(static_cast<int64_t>(n) - static_cast<int64_t>(reported),
                                 std::memory_order_relaxed);
  reported = n;
}

/// Messages an actor holds in its mailbox's queue after a turn: held back by an `await`, or
/// left for the next turn. Read without touching the mailbox's inbound stack: after a turn
/// that stack may be marked blocked (the actor sleeps until the next enqueue), and
/// `mailbox().size()` would take that mark away and leave the actor asleep for good. Messages
/// that arrived after the turn's last fetch are counted at the end of the next turn.
template <class Actor>
size_t held_messages(Actor& a) {
  auto& q = a.mailbox().queue();
  constexpr auto normal = caf::scheduled_actor::normal_queue_index;
  return q.total_task_size() + std::get<normal>(q.queues()).cache().total_task_size();
}

/// Sends queue entries committed outside a run to the shard of `env`.
template <class Env>
void report_enqueued(const Env& env, persistence::queue_entries entries,
                     event_source source = event_source::api) {
  if (auto shard = caf::actor_cast<caf::actor>(env.parent))
    caf::anon_send(shard, enqueued_atom_v, std::move(entries), static_cast<uint8_t>(source));
}

/// An entity actor's event starts: into its trail (the event in progress).
template <class Env>
void begin_event(const Env& env, actor_trail& t, event_kind k, event_source s,
                 const std::string* lane = nullptr) {
  t.begin(k, s, lane, env.now_us());
}

/// The event ends: recorded in the trail, and handed to the node's trace hub when somebody
/// traces (one relaxed load otherwise).
template <class Env>
void end_event(const Env& env, actor_trail& t, const std::string& id, event_result r,
               int64_t version) {
  recent_event e;
  auto k = t.current_kind();
  bool keep = k != event_kind::get && k != event_kind::read_state;
  if (t.end(r, version, env.now_us(), e, keep) && env.trace && env.trace->any())
    env.trace->publish(id, env.shard, e);
}

/// What a shard is told by the node (the kit's part; the kind's part is its env).
struct shard_config {
  uint32_t shard = 0;
  int64_t epoch = 0;
  /// The lanes' limits and back-off (asked once per lane).
  lane_scheduler::options_fn lanes;
  /// Where due entries come from (polled); may be invalid when the kind has no queues.
  queue_store store;
  /// Whether to poll queues at all (a kind without lanes, e.g. offers without stages).
  bool has_queues = true;
  std::chrono::milliseconds queue_lookahead{1000};
  std::chrono::milliseconds queue_poll{250};
  /// The longest wait between polls that find nothing (each doubles it from queue_poll): the
  /// safety poll of an idle shard. Entries due later that the shard knows of (the store's
  /// hint, its actors' commits) are polled for in time whatever this is; entries written
  /// behind its back come with a notice (`enqueued` with no entries).
  std::chrono::milliseconds queue_poll_idle{30'000};
  /// The longest wait between polls that keep failing.
  std::chrono::milliseconds queue_poll_cap{2000};
  uint32_t queue_page = 5000;
  /// Entities with an entry due within this window are activated ahead of time. 0: off.
  std::chrono::milliseconds queue_prefetch{250};
  int max_attempts = 3;
  int background_share = 4;
  std::chrono::milliseconds idle_timeout{60'000};
  size_t max_resident = 100'000;
  /// How long a drain waits for its entity actors (`cluster.drain_timeout`); then it cuts them.
  std::chrono::milliseconds drain_timeout{20'000};
  /// Shared by the kind's shards of a node. Never null.
  std::shared_ptr<entity_stats> stats = std::make_shared<entity_stats>();
  /// This shard's own figures (a node's shard_registry hands them out). Never null.
  std::shared_ptr<shard_stats> figures = std::make_shared<shard_stats>();
  /// Lanes paused when the shard starts (pause_atom changes them later).
  std::set<std::string> paused;
  /// The node's PostgreSQL tracker: paces failed polls, and the failures it reported are not
  /// logged again here. Null: every failure is logged, polls wait their own back-off only.
  std::shared_ptr<const dependency_tracker> db;
  /// Due times are read on this clock; timers (idle sweep, polls, wake-ups) run on the actor
  /// system's clock (CAF's test scheduler has its own). Empty: now_us().
  wall_clock_fn wall_clock;
  /// The node's live traces; null: none.
  std::shared_ptr<trace_hub> trace;
  /// Events each entity actor keeps (`console.recent_events`); 0: none.
  uint16_t recent_events = 0;
  /// The figures of this shard's writer (its write lag, for inspection); may be null.
  const writer_slot* write_slot = nullptr;
  /// The trail of one of its entity actors (a kind that keeps trails sets it); null: none.
  trail_fn trail = nullptr;
};

/// Logging of the kit's shards (kit/shard.cpp: keeps spdlog out of this header).
namespace log {
void drained(const char* kind, uint32_t shard);
void draining(const char* kind, uint32_t shard, size_t resident);
void drain_cut(const char* kind, uint32_t shard, std::chrono::milliseconds after,
               const std::vector<std::string>& ids);
void dead_letter(const char* kind, uint32_t shard, const std::string& id, const std::string& lane,
                 int attempts, const std::string& reason);
void dead_letter_not_written(const char* kind, uint32_t shard, const std::string& id,
                             const std::string& lane, const caf::error& err);
void lease_lost(const char* kind, uint32_t shard);
void run_failed(const char* kind, uint32_t shard, const std::string& id, const std::string& lane,
                int attempt, bool outage, int64_t retry_in_ms, const caf::error& err);
void poll_failed(const char* kind, uint32_t shard, const caf::error& err,
                 std::chrono::milliseconds retry_in);
void crashed(const char* kind, uint32_t shard, const std::string& id);
} // namespace log

// -- the shard --------------------------------------------------------------------------------

template <class Kind>
struct shard_state {
  using kind = Kind;
  static inline const char* name = "gost.shard";
  shard_config cfg;
  caf::intrusive_ptr<typename Kind::env> env;
  std::unique_ptr<lane_scheduler> sched;
  std::unique_ptr<retry_policy> retries;
  /// The lanes' figures (cfg.figures->lane), looked up once per lane: the stats' own map takes
  /// a lock the console shares, and a run must not pay it.
  std::unordered_map<std::string, lane_stats*> lane_figures;
  /// Resident entity actors in LRU order, with when the shard last handed each a request.
  gost::detail::resident_set<typename Kind::actor> residents;
  int64_t wake_at_us = 0;
  /// Entries finished while a poll was in flight: the poll may have read them before their
  /// commit, and must not bring them back.
  bool polling = false;
  std::set<std::pair<std::string, std::string>> done_during_poll;
  /// Where the next poll continues: the last entry read (empty: from the start). Entries
  /// committed behind it by this shard are learned from the commits; a full scan from the
  /// start every `full_scan_every` catches anything else.
  persistence::queue_entries cursor;
  std::chrono::steady_clock::time_point last_full_scan{};
  /// When the next poll is due (its timer is set for then; a timer message that comes earlier
  /// is an older one, and ignored). max(): none scheduled.
  std::chrono::steady_clock::time_point poll_at = std::chrono::steady_clock::time_point::max();
  /// The wait before the next poll: queue_poll, doubled by each poll that found nothing (up to
  /// idle_poll_cap(cfg)); reset by one that found work.
  std::chrono::milliseconds poll_wait{0};
  /// The earliest due time beyond the look-ahead window the shard knows of (the last poll's
  /// hint, lowered by later commits); max(): none. The shard polls in time for it.
  int64_t far_due_us = std::numeric_limits<int64_t>::max();
  /// A notice (entries written behind the shard's back) came while a poll was in flight:
  /// poll again from the start when it ends.
  bool poll_again = false;
  std::optional<backoff> idle_polls;   ///< set at the start (from cfg)
  std::optional<retry_pace> poll_pace; ///< set at the start (from cfg)
  bool more_waiting = false; ///< the last poll filled its page: PostgreSQL holds more due work
  bool draining = false;
  caf::typed_response_promise<ok_atom> drained;
  /// Passivated entity actors (by CAF id: the entity's id, the actor) until they report
  /// stopping: they may still be finishing events. Weak: a drain cut kills those left.
  std::unordered_map<caf::actor_id, std::pair<std::string, caf::actor_addr>> stopping;
  /// Answers to pause requests, given once no run of a paused lane is in flight.
  std::vector<caf::typed_response_promise<ok_atom>> pause_waiters;

  shard_state() = default;
  shard_state(const shard_state&) = delete;
  shard_state& operator=(const shard_state&) = delete;

  /// Entity actors are neither linked nor monitored: a stopping shard (for any reason) takes
  /// them along here. Their durable state is in PostgreSQL; an unfinished event is redone.
  ~shard_state() {
    residents.for_each([](const std::string&, const typename Kind::actor& a) {
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    });
  }
};

template <class Kind>
using shard_impl =
  typename Kind::shard::template extend<caf::reacts_to<wake_atom>, caf::reacts_to<poll_atom>,
                                        caf::reacts_to<sweep_atom>,
                                        caf::reacts_to<drain_atom, ok_atom>>;

template <class Kind>
using shard_ptr = typename shard_impl<Kind>::template stateful_pointer<shard_state<Kind>>;

constexpr auto full_scan_every = std::chrono::seconds{30};

template <class Self>
void learn(Self self, const persistence::queue_entries& entries,
           event_source origin = event_source::stage);

namespace detail {

inline int64_t us(std::chrono::milliseconds d) {
  return std::chrono::duration_cast<std::chrono::microseconds>(d).count();
}

/// Now on the shard's wall clock (due times).
template <class Self>
int64_t wall_us(Self self) {
  return self->state.env->now_us();
}

/// One entity actor more (+1) or less (-1) in memory: the kind's and the shard's figures.
inline void count_resident(const shard_config& cfg, int64_t delta) {
  cfg.stats->resident.fetch_add(delta, std::memory_order_relaxed);
  cfg.figures->resident.fetch_add(delta, std::memory_order_relaxed);
}

/// The figures of `lane` in the shard's stats.
template <class Self>
lane_stats& lane_figures(Self self, const std::string& lane) {
  auto& st = self->state;
  auto i = st.lane_figures.find(lane);
  if (i == st.lane_figures.end())
    i = st.lane_figures.emplace(lane, &st.cfg.figures->lane(lane)).first;
  return *i->second;
}

/// The shard's queue figures (backlog and its oldest due entry), after the scheduler changed.
template <class Self>
void publish_queue(Self self) {
  auto& st = self->state;
  st.cfg.figures->backlog.store(static_cast<int64_t>(st.sched->waiting()),
                                std::memory_order_relaxed);
  st.cfg.figures->oldest_due_us.store(st.sched->oldest_waiting(), std::memory_order_relaxed);
  st.sched->each_lane([&](const std::string& lane, size_t waiting) {
    lane_figures(self, lane)
      .backlog.store(static_cast<int64_t>(waiting), std::memory_order_relaxed);
  });
}

/// Answers the pause requests once no run of a paused lane is in flight.
template <class Self>
void settle_pauses(Self self) {
  auto& st = self->state;
  if (st.pause_waiters.empty() || st.sched->paused_in_flight() > 0)
    return;
  for (auto& rp : st.pause_waiters)
    rp.deliver(ok_atom_v);
  st.pause_waiters.clear();
}

template <class Self>
caf::error moved_error(Self self) {
  return make_error(errc::moved, "shard " + std::to_string(self->state.cfg.shard)
                                   + " is moving to another node");
}

/// Stops an entity actor gracefully: forgotten here first, then told; everything forwarded to
/// it before is still in its mailbox and handled before it stops.
template <class Self>
void passivate(Self self, const std::string& which) {
  auto& st = self->state;
  // `which` may be the resident set's own key (oldest_id()), which remove() frees: a copy.
  std::string id = which;
  auto a = st.residents.remove(id); // its stopped message then finds nothing to forget
  if (!a)
    return;
  count_resident(st.cfg, -1);
  st.stopping.emplace(a.id(), std::make_pair(std::move(id), a.address()));
  st.cfg.stats->passivated.fetch_add(1, std::memory_order_relaxed);
  self->send(a, passivate_atom_v, ok_atom_v);
}

template <class Self>
auto child(Self self, const std::string& id) {
  using Kind = typename std::decay_t<decltype(self->state)>::kind;
  auto& st = self->state;
  auto now = self->clock().now();
  if (auto* a = st.residents.use(id, now))
    return *a;
  // The cap: make room by passivating the least recently used actor.
  while (st.residents.size() >= std::max<size_t>(1, st.cfg.max_resident) && !st.residents.empty())
    passivate(self, *st.residents.oldest_id());
  auto a = Kind::spawn_entity(self, id, st.env);
  st.residents.add(id, a, now);
  st.cfg.stats->spawned.fetch_add(1, std::memory_order_relaxed);
  count_resident(st.cfg, +1);
  return a;
}

/// While draining: once every entity actor is gone (each finished and committed what it had),
/// answer the drain request and stop.
template <class Self>
void check_drained(Self self) {
  using Kind = typename std::decay_t<decltype(self->state)>::kind;
  auto& st = self->state;
  if (!st.draining || !st.residents.empty() || !st.stopping.empty() || !st.drained.pending())
    return;
  log::drained(Kind::name, st.cfg.shard);
  st.drained.deliver(ok_atom_v);
  self->quit(caf::exit_reason::user_shutdown);
}

/// The drain's bound (drain_timeout) passed: the entity actors still finishing are sent a kill
/// (one waiting in an await takes it when the await ends: CAF 0.17 holds every other message
/// back meanwhile), logged and counted, and the drain is answered without them. What they had
/// not committed is redone by the shard's next owner (their queue entries stay; fencing
/// refuses their late writes).
template <class Self>
void cut_drain(Self self) {
  using Kind = typename std::decay_t<decltype(self->state)>::kind;
  auto& st = self->state;
  if (!st.draining || !st.drained.pending())
    return;
  std::vector<std::string> ids;
  std::vector<std::string> resident;
  st.residents.for_each(
    [&](const std::string& id, const typename Kind::actor&) { resident.push_back(id); });
  for (auto& id : resident) // none expected: a draining shard spawns no actor
    passivate(self, id);
  for (auto& [aid, who] : st.stopping) {
    ids.push_back(who.first);
    if (auto a = caf::actor_cast<caf::actor>(who.second))
      caf::anon_send_exit(a, caf::exit_reason::kill);
  }
  st.stopping.clear();
  if (!ids.empty()) {
    st.cfg.stats->drain_cut.fetch_add(ids.size(), std::memory_order_relaxed);
    log::drain_cut(Kind::name, st.cfg.shard, st.cfg.drain_timeout, ids);
  }
  check_drained(self);
}

/// The idle sweep: passivates, least recently used first, every entity actor the shard has not
/// handed a request for `idle_timeout`. One timer per shard instead of one per actor.
template <class Self>
void sweep_idle(Self self) {
  auto& st = self->state;
  auto cutoff = self->clock().now() - st.cfg.idle_timeout;
  while (!st.residents.empty() && st.residents.oldest_last_used() <= cutoff)
    passivate(self, *st.residents.oldest_id());
}

inline std::chrono::milliseconds sweep_interval(const shard_config& c) {
  return std::clamp(c.idle_timeout / 4, std::chrono::milliseconds{5},
                    std::chrono::milliseconds{10'000});
}

template <class Self>
void dispatch(Self self);

template <class Self>
void poll(Self self);

template <class Self>
void notified(Self self);

/// The longest wait between polls that find nothing: queue_poll_idle, never below queue_poll.
inline std::chrono::milliseconds idle_poll_cap(const shard_config& cfg) {
  return std::max(cfg.queue_poll, cfg.queue_poll_idle);
}

/// The wait before the next poll: the pace (queue_poll, or the idle back-off's), but no later
/// than the first poll that reads the earliest known entry beyond the window (a poll at t reads
/// what is due until t + lookahead, so that entry is known lookahead ahead of its time, and
/// its actor warmed a prefetch ahead).
template <class Self>
std::chrono::milliseconds next_poll_wait(Self self) {
  auto& st = self->state;
  auto wait = std::max(st.poll_wait, st.cfg.queue_poll);
  if (st.far_due_us != std::numeric_limits<int64_t>::max()) {
    auto read_at_us = st.far_due_us - us(st.cfg.queue_lookahead);
    auto in = std::chrono::ceil<std::chrono::milliseconds>(
      std::chrono::microseconds{std::max<int64_t>(0, read_at_us - wall_us(self))});
    wait = std::max(st.cfg.queue_poll, std::min(wait, in));
  }
  return wait;
}

/// Sets the next poll's timer, unless one is set for no later than it.
template <class Self>
void schedule_poll(Self self) {
  auto& st = self->state;
  if (!st.cfg.has_queues)
    return;
  auto wait = next_poll_wait(self);
  auto at = self->clock().now() + wait;
  if (st.poll_at <= at)
    return;
  st.poll_at = at;
  self->delayed_send(self, wait, poll_atom_v);
}

/// An entry is finished (committed or dead-lettered): free its slot.
template <class Self>
void finished(Self self, const std::string& lane, const std::string& id) {
  auto& st = self->state;
  st.sched->done(lane, id);
  settle_pauses(self);
  if (st.polling)
    st.done_during_poll.emplace(lane, id);
  else if (st.more_waiting && st.sched->known() < st.cfg.queue_page / 2)
    poll(self); // keep the in-memory queue fed while a backlog waits in PostgreSQL
}

template <class Self>
void schedule_wakeup(Self self) {
  auto& st = self->state;
  auto due = st.sched->next_due();
  if (st.cfg.queue_prefetch.count() > 0) {
    auto warm = st.sched->next_warm_due();
    if (warm != std::numeric_limits<int64_t>::max())
      due = std::min(due, warm - us(st.cfg.queue_prefetch));
  }
  if (due == std::numeric_limits<int64_t>::max())
    return;
  if (st.wake_at_us != 0 && st.wake_at_us <= due)
    return;
  st.wake_at_us = due;
  auto wait = std::max<int64_t>(0, due - wall_us(self));
  self->delayed_send(self, std::chrono::microseconds{wait}, wake_atom_v);
}

template <class Self>
void dead_letter(Self self, const std::string& lane, const std::string& id, int attempts,
                 const std::string& reason) {
  using Kind = typename std::decay_t<decltype(self->state)>::kind;
  auto& st = self->state;
  log::dead_letter(Kind::name, st.cfg.shard, id, lane, attempts, reason);
  self
    ->request(st.env->writer, caf::infinite, write_atom_v, st.cfg.shard, st.cfg.epoch,
              Kind::dead_letter(lane, id, attempts, reason))
    .then(
      [=](persistence::write_outcome) {
        self->state.cfg.stats->dead_letters.fetch_add(1, std::memory_order_relaxed);
        lane_figures(self, lane).dead_letters.fetch_add(1, std::memory_order_relaxed);
        finished(self, lane, id);
        dispatch(self);
      },
      [=](caf::error& err) {
        // Not recorded: the entry stays queued in PostgreSQL and is found again by a poll.
        if (!db_outage_reported(self->state.cfg.db.get(), err))
          log::dead_letter_not_written(Kind::name, self->state.cfg.shard, id, lane, err);
        finished(self, lane, id);
      });
}

template <class Self>
void start_run(Self self, lane_scheduler::work w) {
  using Kind = typename std::decay_t<decltype(self->state)>::kind;
  auto target = child(self, w.entity_id);
  self->state.cfg.figures->running.fetch_add(1, std::memory_order_relaxed);
  // The lane's own figures: the shard's stats own them, and outlive this run's callbacks.
  auto* lane = &lane_figures(self, w.lane);
  lane->running.fetch_add(1, std::memory_order_relaxed);
  // No timeout (a timeout is a clock entry per run): an entity actor that dies answers with an
  // error through CAF, and one that lives finishes its event.
  self->request(target, caf::infinite, run_atom_v, w.lane, static_cast<uint8_t>(w.source))
    .then(
      [=](persistence::queue_entries& committed) {
        auto& st = self->state;
        st.cfg.figures->running.fetch_sub(1, std::memory_order_relaxed);
        st.cfg.figures->runs.fetch_add(1, std::memory_order_relaxed);
        lane->running.fetch_sub(1, std::memory_order_relaxed);
        lane->runs.fetch_add(1, std::memory_order_relaxed);
        st.retries->succeeded(w.lane, w.entity_id);
        finished(self, w.lane, w.entity_id);
        learn(self, committed);
        dispatch(self);
      },
      [=](caf::error& err) {
        auto& st = self->state;
        st.cfg.figures->running.fetch_sub(1, std::memory_order_relaxed);
        st.cfg.figures->failures.fetch_add(1, std::memory_order_relaxed);
        lane->running.fetch_sub(1, std::memory_order_relaxed);
        lane->failures.fetch_add(1, std::memory_order_relaxed);
        if (err == errc::fenced) {
          log::lease_lost(Kind::name, st.cfg.shard);
          self->quit(err);
          return;
        }
        auto backoff = st.sched->options(w.lane).retry_backoff;
        auto now = wall_us(self);
        auto d = st.retries->failed(w.lane, w.entity_id, err, backoff, now);
        if (d.what == retry_policy::decision::kind::dead_letter) {
          dead_letter(self, w.lane, w.entity_id, d.attempts, error_message(err));
          return;
        }
        if (!db_outage_reported(st.cfg.db.get(), err))
          log::run_failed(Kind::name, st.cfg.shard, w.entity_id, w.lane, d.attempts, !d.counted,
                          (d.retry_at_us - now) / 1000, err);
        st.sched->retry(w.lane, w.entity_id, d.retry_at_us);
        dispatch(self);
      });
}

template <class Self>
void dispatch(Self self) {
  auto& st = self->state;
  settle_pauses(self);
  if (st.draining)
    return;
  auto now = wall_us(self);
  if (st.cfg.queue_prefetch.count() > 0)
    for (auto& id : st.sched->take_warm(now, now + us(st.cfg.queue_prefetch)))
      self->send(child(self, id), warm_atom_v);
  for (auto& w : st.sched->take(now))
    start_run(self, std::move(w));
  publish_queue(self);
  schedule_wakeup(self);
}

template <class Self>
void poll(Self self) {
  using Kind = typename std::decay_t<decltype(self->state)>::kind;
  auto& st = self->state;
  if (st.polling || st.draining || !st.cfg.has_queues || !st.cfg.store)
    return;
  // After a failure: no call until the wait is over or the database is back.
  if (!st.poll_pace->may_try(self->clock().now())) {
    schedule_poll(self);
    return;
  }
  // Memory bound: hold at most about a page of entries; the rest waits in PostgreSQL.
  if (st.sched->known() >= st.cfg.queue_page) {
    schedule_poll(self);
    return;
  }
  auto now = self->clock().now();
  if (now - st.last_full_scan >= full_scan_every) {
    st.cursor.clear();
    st.last_full_scan = now;
  }
  auto until = wall_us(self) + us(st.cfg.queue_lookahead);
  st.polling = true;
  st.done_during_poll.clear();
  auto room = static_cast<uint32_t>(st.cfg.queue_page - st.sched->known());
  self
    ->request(st.cfg.store, std::chrono::seconds{30}, due_atom_v, st.cfg.shard, until, room,
              st.cursor)
    .then(
      [=](persistence::queue_entries& entries) {
        auto& s = self->state;
        s.polling = false;
        s.poll_pace->succeeded();
        // The store may add the first entry past the window: the next poll comes in time for
        // it (see next_poll_wait); it is not queued now. A later entry learned meanwhile stays
        // known; one within this poll's window was read by it.
        if (s.far_due_us <= until)
          s.far_due_us = std::numeric_limits<int64_t>::max();
        if (!entries.empty() && entries.back().due_at_us > until) {
          s.far_due_us = std::min(s.far_due_us, entries.back().due_at_us);
          entries.pop_back();
        }
        // Work due now brings the busy pace back; entries read ahead of their time do not
        // (the hint times the poll for the next ones).
        auto now_us = wall_us(self);
        if (std::any_of(entries.begin(), entries.end(),
                        [&](const persistence::queue_entry& e) { return e.due_at_us <= now_us; })) {
          s.idle_polls->reset();
          s.poll_wait = s.cfg.queue_poll;
        } else {
          s.poll_wait = s.idle_polls->next();
        }
        if (!entries.empty())
          s.cursor.assign(1, entries.back());
        if (!s.done_during_poll.empty()) {
          entries.erase(
            std::remove_if(entries.begin(), entries.end(),
                           [&](const persistence::queue_entry& e) {
                             return s.done_during_poll.count({e.lane, e.entity_id}) != 0;
                           }),
            entries.end());
          s.done_during_poll.clear();
        }
        s.more_waiting = entries.size() >= room;
        s.sched->add(entries, event_source::queue, wall_us(self));
        dispatch(self);
        if (s.poll_again) {
          s.poll_again = false;
          notified(self);
          return;
        }
        schedule_poll(self);
      },
      [=](caf::error& err) {
        auto& s = self->state;
        s.polling = false;
        s.poll_again = false;
        s.done_during_poll.clear();
        auto wait = s.poll_pace->failed(self->clock().now());
        if (!db_outage_reported(s.cfg.db.get(), err))
          log::poll_failed(Kind::name, s.cfg.shard, err, wait);
        schedule_poll(self);
      });
}

/// Entries were written behind the shard's back (another node's requeue or event; the node's
/// wake channel): poll from the start now, at the busy pace.
template <class Self>
void notified(Self self) {
  auto& st = self->state;
  if (!st.cfg.has_queues)
    return;
  st.cursor.clear();
  st.idle_polls->reset();
  st.poll_wait = st.cfg.queue_poll;
  if (st.polling) {
    st.poll_again = true;
    return;
  }
  poll(self);
}

} // namespace detail

/// Adds committed or loaded entries that are due within the lookahead window; later ones are
/// found by a later poll, which comes in time for the earliest of them. For kinds' own handlers
/// (e.g. a rescan) too. `origin`: who queued them (entries due later are timers, background ones
/// the rescan's).
template <class Self>
void learn(Self self, const persistence::queue_entries& entries, event_source origin) {
  auto& st = self->state;
  auto horizon = detail::wall_us(self) + detail::us(st.cfg.queue_lookahead);
  persistence::queue_entries near;
  auto far = st.far_due_us;
  for (auto& e : entries)
    if (e.due_at_us <= horizon)
      near.push_back(e);
    else
      far = std::min(far, e.due_at_us);
  if (far < st.far_due_us) {
    st.far_due_us = far;
    detail::schedule_poll(self); // earlier than planned, if need be
  }
  if (!near.empty() && st.sched->add(near, origin, detail::wall_us(self)) > 0)
    detail::dispatch(self);
}

template <class Kind>
typename shard_impl<Kind>::behavior_type shard_fun(shard_ptr<Kind> self, shard_config cfg,
                                                   caf::intrusive_ptr<typename Kind::env> env) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.sched = std::make_unique<lane_scheduler>(st.cfg.lanes, st.cfg.background_share);
  st.sched->set_paused(st.cfg.paused);
  st.cfg.figures->epoch.store(st.cfg.epoch, std::memory_order_relaxed);
  st.retries = std::make_unique<retry_policy>(st.cfg.max_attempts);
  st.idle_polls.emplace(st.cfg.queue_poll, detail::idle_poll_cap(st.cfg));
  st.poll_pace.emplace(st.cfg.queue_poll, std::max(st.cfg.queue_poll, st.cfg.queue_poll_cap),
                       st.cfg.db);
  env->shard = st.cfg.shard;
  env->epoch = st.cfg.epoch;
  env->parent = self->address(); // weak: the shard's state holds the environment
  env->wall_clock = st.cfg.wall_clock;
  env->figures = st.cfg.figures;
  env->trace = st.cfg.trace;
  env->recent_events = st.cfg.recent_events;
  st.env = std::move(env);
  // Any exit message (the node stopping the shard) stops the shard; entity actors report their
  // own stop (stopped_atom).
  self->set_exit_handler([=](caf::exit_msg& em) { self->quit(em.reason); });
  self->delayed_send(self, detail::sweep_interval(st.cfg), sweep_atom_v);
  if (st.cfg.has_queues) {
    st.poll_at = self->clock().now(); // the first poll: now
    self->send(self, poll_atom_v);
  }
  Kind::on_start(self);
  // Every operation of the kind: spawn the entity's actor if needed and hand the request over
  // (the actor answers the requester directly).
  auto forward = [=](auto tag, auto&... xs) -> typename decltype(tag)::result_type {
    if (self->state.draining)
      return detail::moved_error(self);
    return self->delegate(detail::child(self, entity_id_of(xs...)), std::move(xs)...);
  };
  return std::apply(
    [&](auto... extra) {
      return make_behavior<typename shard_impl<Kind>::behavior_type>(
        make_handlers<typename Kind::ops::signatures>(forward),
        [=](drain_atom) -> caf::result<ok_atom> {
          auto& s = self->state;
          s.draining = true;
          s.drained = self->template make_response_promise<ok_atom>();
          auto rp = s.drained;
          log::draining(Kind::name, s.cfg.shard, s.residents.size());
          std::vector<std::string> ids;
          s.residents.for_each(
            [&](const std::string& id, const typename Kind::actor&) { ids.push_back(id); });
          for (auto& id : ids)
            detail::passivate(self, id);
          // Passivated actors are forgotten at once; their stopped messages follow. Those
          // still running at the bound are cut (drain_atom, ok_atom).
          detail::check_drained(self);
          if (rp.pending())
            self->delayed_send(self, s.cfg.drain_timeout, drain_atom_v, ok_atom_v);
          return rp;
        },
        [=](drain_atom, ok_atom) { detail::cut_drain(self); },
        [=](enqueued_atom, const persistence::queue_entries& entries, uint8_t source) {
          if (entries.empty())
            detail::notified(self); // written behind its back: look
          else
            learn(self, entries, static_cast<event_source>(source));
        },
        [=](stopped_atom, const std::string& id, uint64_t aid) {
          auto& s = self->state;
          if (s.stopping.erase(aid) == 0) {
            // Not passivated, yet gone: a handler threw (logged by the actor with the error)
            // or someone killed it. Forgotten unless a newer actor for the entity took its
            // place; the next request for the entity starts a new one.
            auto* a = s.residents.find(id);
            if (a != nullptr && a->id() == aid) {
              s.cfg.stats->crashed.fetch_add(1, std::memory_order_relaxed);
              log::crashed(Kind::name, s.cfg.shard, id);
              s.residents.remove(id);
              detail::count_resident(s.cfg, -1);
            }
          }
          detail::check_drained(self);
        },
        [=](pause_atom, std::set<std::string>& lanes) -> caf::result<ok_atom> {
          auto& s = self->state;
          s.sched->set_paused(std::move(lanes));
          auto rp = self->template make_response_promise<ok_atom>();
          s.pause_waiters.push_back(rp);
          detail::dispatch(self); // lanes no longer paused start their backlog; settles
          return rp;
        },
        [=](passivate_atom, const std::string& id) -> bool {
          bool resident = self->state.residents.find(id) != nullptr;
          detail::passivate(self, id);
          detail::check_drained(self);
          return resident;
        },
        [=](get_atom, resident_atom, const std::string& id) -> typename Kind::actor {
          auto* a = self->state.residents.find(id);
          return a != nullptr ? *a : typename Kind::actor{};
        },
        [=](resident_atom, const std::string& id) -> caf::result<activity> {
          auto& s = self->state;
          activity view;
          view.epoch = s.cfg.epoch;
          auto now = detail::wall_us(self);
          if (s.cfg.write_slot != nullptr)
            if (auto oldest = s.cfg.write_slot->oldest_us.load(std::memory_order_relaxed))
              view.write_lag_us = std::max<int64_t>(0, now - oldest);
          auto* a = s.residents.find(id);
          if (a == nullptr)
            return view;
          view.resident = true;
          // The trail is read here, not asked of the actor: it tells what the actor waits on
          // even while an event holds its mailbox back.
          if (s.cfg.trail != nullptr)
            if (auto* t = s.cfg.trail(caf::actor_cast<caf::abstract_actor*>(*a)))
              t->snapshot(view, now);
          // An actor inside an event answers after it: wait a second at most.
          auto rp = self->template make_response_promise<activity>();
          self->request(*a, std::chrono::seconds{1}, mailbox_atom_v)
            .then(
              [rp, view](uint64_t n) mutable {
                view.mailbox = static_cast<int64_t>(n);
                rp.deliver(std::move(view));
              },
              [rp, view](caf::error&) mutable { rp.deliver(std::move(view)); });
          return rp;
        },
        [=](wake_atom) {
          self->state.wake_at_us = 0;
          detail::dispatch(self);
        },
        [=](sweep_atom) {
          detail::sweep_idle(self);
          self->delayed_send(self, detail::sweep_interval(self->state.cfg), sweep_atom_v);
        },
        [=](poll_atom) {
          auto& s = self->state;
          if (self->clock().now() < s.poll_at)
            return; // an older timer: a later one is set for the poll now planned
          s.poll_at = std::chrono::steady_clock::time_point::max();
          detail::poll(self);
        },
        extra...);
    },
    Kind::extra_handlers(self));
}

/// The shard supervisor of one shard for entities of `Kind`.
template <class Kind>
typename Kind::shard spawn_shard(caf::actor_system& sys, shard_config cfg,
                                 caf::intrusive_ptr<typename Kind::env> env) {
  return caf::actor_cast<typename Kind::shard>(
    sys.spawn(&shard_fun<Kind>, std::move(cfg), std::move(env)));
}

} // namespace gost::kit
