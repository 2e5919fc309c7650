#include "gost/images/pools.hpp"

#include <algorithm>
#include <any>
#include <chrono>
#include <deque>
#include <map>
#include <optional>
#include <set>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "gost/core/actor_pool.hpp"
#include "gost/core/backoff.hpp"
#include "gost/core/errc.hpp"
#include "gost/core/log.hpp"
#include "gost/images/stats.hpp"

namespace gost::images {

namespace {

const auto lg = gost::log::get("images");

/// Outcomes are stored in batches of at most this many (one transaction each)...
constexpr size_t flush_at = 32;
/// ...and none waits longer than this to be stored.
constexpr auto flush_wait = std::chrono::milliseconds{50};

/// What a feeder handles: its interface, its polls of the queue and its batched stores.
using feeder_impl =
  image_feeder_actor::extend<caf::reacts_to<tick_atom>, caf::reacts_to<flush_atom>>;

/// A batch of foreign tasks (run_foreign_tasks) until its last outcome is stored.
struct foreign_batch {
  caf::typed_response_promise<foreign_counts> rp;
  size_t unstored = 0;
  foreign_counts counts;
};

struct feeder_state {
  static inline const char* name = "gost.images.feeder";
  function fn = function::ratio;
  pools_options opts;
  pool_actor pool;
  size_t slots = 0;     ///< tasks held at once: running in the pool and waiting there
  size_t in_flight = 0; ///< taken and not yet stored
  std::vector<task_done> finished;
  std::vector<uint64_t> finished_batch; ///< per `finished`: its foreign batch, 0: the queue's
  /// Foreign tasks not yet started (they go before the PostgreSQL queue's), with their batch.
  std::deque<std::pair<persistence::image_task, uint64_t>> waiting;
  std::map<uint64_t, foreign_batch> batches;
  /// Result keys of the tasks started or waiting here, and the foreign batches that asked for
  /// one of them again meanwhile (answered with it: an identical task is not run twice).
  std::set<std::string> active;
  std::map<std::string, std::vector<uint64_t>> followers;
  uint64_t next_batch = 1;
  bool draining = false; ///< foreign batches refused (the consumers are stopping)
  bool tick_pending = false;
  std::chrono::steady_clock::time_point tick_at{}; ///< of the pending tick; earlier ones are stale
  std::optional<backoff> idle; ///< the wait after a look that found no task (opts.poll_idle)
  bool flush_pending = false;  ///< a flush_atom is on its way (`flush_wait` after a finish)
  /// The last look for due tasks failed: the next failures write no line (a database outage
  /// is its tracker's to log, and this feeder looks every 10 polls while it lasts).
  bool take_failing = false;
  batch_counts counts;
};

using feeder_ptr = feeder_impl::stateful_pointer<feeder_state>;

/// One of foreign batch `id`'s tasks is settled: stored (`err` empty), or not (`err`: the
/// batch is answered with it at once, so its tasks are delivered again).
void settle_one(feeder_ptr self, uint64_t id, const caf::error& err) {
  auto& st = self->state;
  auto b = st.batches.find(id);
  if (b == st.batches.end())
    return; // the queue's task (0), or a batch already answered with an error
  if (err) {
    b->second.rp.deliver(err);
    st.batches.erase(b);
  } else if (--b->second.unstored == 0) {
    b->second.rp.deliver(b->second.counts);
    st.batches.erase(b);
  }
}

/// The task of `key` of foreign batch `id` (0: of the PostgreSQL queue) is settled: its batch
/// and the batches that asked for the same key meanwhile.
void settle_key(feeder_ptr self, const std::string& key, uint64_t id, const caf::error& err) {
  auto& st = self->state;
  settle_one(self, id, err);
  if (auto f = st.followers.find(key); f != st.followers.end()) {
    auto ids = std::move(f->second);
    st.followers.erase(f);
    for (auto follower : ids)
      settle_one(self, follower, err);
  }
  st.active.erase(key);
}

/// The group of a task's partition, as the placement says now.
uint32_t group_of(const feeder_state& st, const persistence::image_task& t) {
  return st.opts.where->group_of(t.partition);
}

void flush(feeder_ptr self) {
  auto& st = self->state;
  if (st.finished.empty())
    return;
  auto finished = std::move(st.finished);
  auto ids = std::move(st.finished_batch);
  st.finished.clear();
  st.finished_batch.clear();
  // One transaction per shard group: each outcome where its partition's rows are.
  std::map<uint32_t, std::vector<size_t>> by_group;
  for (size_t i = 0; i < finished.size(); ++i)
    by_group[group_of(st, finished[i].task)].push_back(i);
  for (auto& [group, at] : by_group) {
    std::vector<task_done> share;
    share.reserve(at.size());
    for (auto i : at)
      share.push_back(std::move(finished[i]));
    caf::error err;
    if (auto* db = st.opts.where->database(group); db == nullptr)
      err = make_error(errc::unavailable,
                       "shard group " + std::to_string(group) + " is not open on this node");
    else
      err = store_outcomes(*db, st.fn, share, st.opts.work, st.counts);
    if (err)
      lg->warn("image results not stored function={} count={} group={} error={}; the tasks run "
               "again (the queue's after the visibility timeout, Kafka's delivered again)",
               to_string(st.fn), share.size(), group, self->system().render(err));
    for (size_t k = 0; k < at.size(); ++k)
      settle_key(self, task_key{st.fn, share[k].task.args}.result_key(), ids[at[k]], err);
  }
}

void tick_soon(feeder_ptr self, std::chrono::milliseconds after) {
  auto& st = self->state;
  auto at = std::chrono::steady_clock::now() + after;
  if (st.tick_pending && st.tick_at <= at)
    return;
  st.tick_pending = true;
  st.tick_at = at;
  if (after.count() == 0)
    self->send(self, tick_atom_v);
  else
    self->delayed_send(self, after, tick_atom_v);
}

/// The queue depth on /metrics: one feeder of the node counts all functions every 5 s.
void count_queue(feeder_ptr self) {
  auto& st = self->state;
  auto* stats = st.opts.work.stats;
  auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::steady_clock::now().time_since_epoch())
                  .count();
  if (stats == nullptr || !stats->count_queue_now(now_ms, 5000))
    return;
  // Summed over the shard groups' databases.
  std::map<function, int64_t> queued;
  for (auto g : st.opts.where->groups()) {
    auto* db = st.opts.where->database(g);
    if (db == nullptr)
      continue;
    auto counts = persistence::count_image_tasks(*db);
    if (!counts)
      return; // the next round counts again; the database's outage is its tracker's to log
    for (auto& [name, n] : *counts)
      if (function fn; parse_function(name, fn))
        queued[fn] += n;
  }
  for (auto& f : stats->functions)
    f.queued.store(0, std::memory_order_relaxed);
  for (auto& [fn, n] : queued)
    stats->of(fn).queued.store(n, std::memory_order_relaxed);
}

/// Runs `t` in the pool; `batch`: its foreign batch (0: a task of the PostgreSQL queue).
void start(feeder_ptr self, const persistence::image_task& t, uint64_t batch) {
  auto& st = self->state;
  ++st.in_flight;
  st.active.insert(task_key{st.fn, t.args}.result_key());
  if (auto* stats = st.opts.work.stats)
    stats->of(st.fn).in_flight.fetch_add(1, std::memory_order_relaxed);
  task_key key{st.fn, t.args};
  auto work = st.opts.work;
  self
    ->request(st.pool, caf::infinite, run_atom_v,
              pool_job{[key, work] { return std::any{run_task(key, work)}; }})
    .then(
      [self, t, batch](pool_result& r) {
        auto& s = self->state;
        --s.in_flight;
        if (auto* stats = s.opts.work.stats)
          stats->of(s.fn).in_flight.fetch_sub(1, std::memory_order_relaxed);
        s.finished.push_back({t, std::any_cast<task_outcome>(std::move(r.value))});
        s.finished_batch.push_back(batch);
        if (!s.flush_pending) {
          s.flush_pending = true;
          self->delayed_send(self, flush_wait, flush_atom_v);
        }
        tick_soon(self, std::chrono::milliseconds{0});
      },
      [self, t, batch](caf::error& err) {
        // The pool refused or the job threw: a queue's task reappears after the visibility
        // timeout, a foreign one is delivered again (a throw is a bug in computing; logged
        // with its URL).
        --self->state.in_flight;
        if (auto* stats = self->state.opts.work.stats)
          stats->of(self->state.fn).in_flight.fetch_sub(1, std::memory_order_relaxed);
        lg->warn("image task failed function={} args={} error={}", to_string(self->state.fn),
                 t.args, self->system().render(err));
        settle_key(self, task_key{self->state.fn, t.args}.result_key(), batch, err);
        tick_soon(self, std::chrono::milliseconds{0});
      });
}

/// Starts waiting foreign tasks while the pool has room.
void start_waiting(feeder_ptr self) {
  auto& st = self->state;
  while (st.in_flight < st.slots && !st.waiting.empty()) {
    auto [t, batch] = std::move(st.waiting.front());
    st.waiting.pop_front();
    if (auto* stats = st.opts.work.stats)
      stats->of(st.fn).waiting.fetch_sub(1, std::memory_order_relaxed);
    auto key = task_key{st.fn, t.args}.result_key();
    if (st.batches.count(batch) != 0 || st.followers.count(key) != 0) // someone waits for it
      start(self, t, batch);
    else
      st.active.erase(key);
  }
}

void feed(feeder_ptr self) {
  auto& st = self->state;
  st.tick_pending = false;
  // Store and take in batches, not a transaction each per task: when half the slots are
  // free (or a batch of outcomes is ready, or nothing runs); `flush_wait` bounds the wait.
  bool half_free = st.in_flight * 2 <= st.slots;
  if (half_free || st.finished.size() >= flush_at)
    flush(self);
  count_queue(self);
  start_waiting(self); // foreign tasks cost no transaction to start: as soon as a slot frees
  if (!(st.in_flight * 2 <= st.slots))
    return; // a finishing task ticks again
  auto parts = st.opts.partitions ? st.opts.partitions() : std::vector<uint32_t>{};
  // The partitions of each shard group, taken from its database in turn while there is room.
  std::map<uint32_t, std::vector<uint32_t>> by_group;
  for (auto p : parts)
    by_group[st.opts.where->group_of(p)].push_back(p);
  auto tasks =
    caf::expected<std::vector<persistence::image_task>>{std::vector<persistence::image_task>{}};
  for (auto& [group, of_group] : by_group) {
    auto room = st.slots - st.in_flight - tasks->size();
    auto* db = st.opts.where->database(group);
    if (room == 0 || db == nullptr)
      continue;
    auto taken =
      persistence::take_image_tasks(*db, to_string(st.fn), of_group, room, st.opts.visibility);
    if (!taken) {
      if (!st.take_failing)
        lg->warn("image tasks not taken function={} group={} error={}; looking again every {} ms",
                 to_string(st.fn), group, self->system().render(taken.error()),
                 (st.opts.poll * 10).count());
      st.take_failing = true;
      for (auto& t : *tasks) // taken from the groups before: they run
        start(self, t, 0);
      tick_soon(self, st.opts.poll * 10);
      return;
    }
    for (auto& t : *taken)
      tasks->push_back(std::move(t));
  }
  st.take_failing = false;
  if (tasks->empty()) {
    if (st.in_flight == 0)
      tick_soon(self, st.idle->next()); // idle: less and less often, until woken
    return;
  }
  st.idle->reset();
  for (auto& t : *tasks)
    start(self, t, 0);
}

/// Foreign tasks: those already answered by a newer final result skipped, identical ones
/// merged, the rest queued before the PostgreSQL queue's; answered when all are stored.
caf::result<foreign_counts> take_foreign(feeder_ptr self, foreign_tasks& in) {
  auto& st = self->state;
  if (st.draining)
    return make_error(errc::unavailable, "the image pools' feeder is stopping");
  std::map<std::string, persistence::image_task> by_key; // identical tasks: the latest asked
  for (auto& t : in.tasks) {
    auto key = task_key{st.fn, t.args}.result_key();
    auto [it, added] = by_key.emplace(key, t);
    if (!added && t.created_at_us > it->second.created_at_us)
      it->second = t;
  }
  // The keys' results, each in its partition's group's database.
  std::map<uint32_t, std::vector<std::string>> keys;
  for (auto& [key, t] : by_key)
    keys[group_of(st, t)].push_back(key);
  auto rows =
    caf::expected<std::vector<persistence::image_result>>{std::vector<persistence::image_result>{}};
  for (auto& [group, of_group] : keys) {
    auto* db = st.opts.where->database(group);
    if (db == nullptr)
      return make_error(errc::unavailable,
                        "shard group " + std::to_string(group) + " is not open on this node");
    auto found = persistence::find_image_results(*db, of_group);
    if (!found)
      return std::move(found.error());
    for (auto& r : *found)
      rows->push_back(std::move(r));
  }
  foreign_counts counts;
  counts.skipped = in.tasks.size() - by_key.size();
  for (auto& r : *rows)
    if (auto it = by_key.find(r.key);
        it != by_key.end() && r.status != "pending" && r.updated_at_us > it->second.created_at_us) {
      by_key.erase(it);
      ++counts.skipped;
    }
  // Identical to a task started or waiting here (an earlier batch's, or the queue's): answered
  // with it.
  std::vector<std::string> follow;
  for (auto it = by_key.begin(); it != by_key.end();)
    if (st.active.count(it->first) != 0) {
      follow.push_back(it->first);
      it = by_key.erase(it);
      ++counts.skipped;
    } else {
      ++it;
    }
  if (auto* stats = st.opts.work.stats) {
    stats->of(st.fn).skipped.fetch_add(counts.skipped, std::memory_order_relaxed);
    stats->of(st.fn).waiting.fetch_add(static_cast<int64_t>(by_key.size()),
                                       std::memory_order_relaxed);
  }
  if (by_key.empty() && follow.empty())
    return counts;
  auto id = st.next_batch++;
  auto& b = st.batches[id];
  b.rp = self->make_response_promise<foreign_counts>();
  b.unstored = by_key.size() + follow.size();
  b.counts = counts;
  b.counts.run = by_key.size();
  for (auto& [key, t] : by_key) {
    st.waiting.emplace_back(t, id);
    st.active.insert(key);
  }
  for (auto& key : follow)
    st.followers[key].push_back(id);
  auto rp = b.rp;
  start_waiting(self); // not feed: that would start a second chain of ticks
  return rp;
}

feeder_impl::behavior_type feeder(feeder_ptr self, function fn, pools_options opts, pool_actor pool,
                                  size_t slots) {
  self->state.fn = fn;
  self->state.opts = std::move(opts);
  self->state.pool = pool;
  self->state.slots = slots;
  self->state.idle.emplace(self->state.opts.poll,
                           std::max(self->state.opts.poll, self->state.opts.poll_idle));
  self->link_to(pool); // stopped together
  tick_soon(self, std::chrono::milliseconds{0});
  return {
    [self](tick_atom) {
      if (std::chrono::steady_clock::now() < self->state.tick_at)
        return; // an older timer: a later one is set for the look now planned
      feed(self);
    },
    [self](wake_atom) {
      // Tasks were queued for a partition of this node: look now, at the busy pace.
      self->state.idle->reset();
      tick_soon(self, std::chrono::milliseconds{0});
    },
    [self](flush_atom) {
      self->state.flush_pending = false;
      flush(self);
    },
    [self](run_atom, foreign_tasks& in) { return take_foreign(self, in); },
    [self](drain_atom) {
      auto& st = self->state;
      st.draining = true;
      auto err = make_error(errc::unavailable, "the image queue's consumers stopped");
      for (auto& [id, b] : st.batches)
        b.rp.deliver(err);
      st.batches.clear();
      st.followers.clear();
      if (auto* stats = st.opts.work.stats)
        stats->of(st.fn).waiting.fetch_sub(static_cast<int64_t>(st.waiting.size()),
                                           std::memory_order_relaxed);
      for (auto& w : st.waiting)
        st.active.erase(task_key{st.fn, w.first.args}.result_key());
      st.waiting.clear();
    },
  };
}

} // namespace

std::map<function, image_feeder_actor> spawn_image_pools(caf::actor_system& sys,
                                                         const pools_options& opts) {
  std::map<function, image_feeder_actor> out;
  for (auto fn : {function::rotate, function::preview, function::ratio, function::main_color}) {
    auto w = opts.workers.count(fn) ? opts.workers.at(fn) : 0;
    if (w <= 0)
      continue;
    auto pool =
      spawn_pool(sys, {std::string{"images."} + to_string(fn), w, static_cast<size_t>(w) * 2});
    // Twice the workers: one task runs while the next waits, so a worker never idles on a
    // round trip to PostgreSQL.
    if (opts.work.stats != nullptr)
      opts.work.stats->of(fn).workers.store(w, std::memory_order_relaxed);
    out.emplace(fn, sys.spawn<caf::detached>(feeder, fn, opts, pool, static_cast<size_t>(w) * 2));
  }
  return out;
}

void run_foreign_tasks_async(caf::actor_system& sys, const image_feeder_actor& feeder,
                             std::vector<persistence::image_task> tasks,
                             std::chrono::milliseconds timeout,
                             std::function<void(caf::expected<foreign_counts>)> done) {
  // One short-lived actor per batch waits for the feeder's answer. (The unused int: CAF 0.17.6
  // trips UBSan spawning a function actor without arguments.)
  sys.spawn(
    [](caf::event_based_actor* self, int, const image_feeder_actor& to, foreign_tasks in,
       std::chrono::milliseconds limit,
       const std::function<void(caf::expected<foreign_counts>)>& reply) {
      self->request(to, limit, run_atom_v, std::move(in))
        .then(
          [self, reply](foreign_counts& c) {
            reply(c);
            self->quit();
          },
          [self, reply](caf::error& err) {
            reply(std::move(err));
            self->quit();
          });
    },
    0, feeder, foreign_tasks{std::move(tasks)}, timeout, std::move(done));
}

caf::expected<foreign_counts> run_foreign_tasks(caf::actor_system& sys,
                                                const image_feeder_actor& feeder,
                                                std::vector<persistence::image_task> tasks,
                                                std::chrono::milliseconds timeout) {
  caf::scoped_actor self{sys};
  caf::expected<foreign_counts> out{foreign_counts{}};
  self->request(feeder, timeout, run_atom_v, foreign_tasks{std::move(tasks)})
    .receive([&](foreign_counts& c) { out = c; }, [&](caf::error& err) { out = std::move(err); });
  return out;
}

} // namespace gost::images
