#include "gost/images/pools.hpp"

#include <any>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "gost/core/actor_pool.hpp"
#include "gost/core/log.hpp"
#include "gost/images/stats.hpp"

namespace gost::images {

namespace {

const auto lg = gost::log::get("images");

/// Outcomes are stored in batches of at most this many (one transaction each).
constexpr size_t flush_at = 32;

struct feeder_state {
  static inline const char* name = "gost.images.feeder";
  function fn = function::ratio;
  pools_options opts;
  pool_actor pool;
  size_t slots = 0;     ///< tasks held at once: running in the pool and waiting there
  size_t in_flight = 0; ///< taken and not yet stored
  std::vector<task_done> finished;
  bool tick_pending = false;
  batch_counts counts;
};

using feeder_ptr = caf::stateful_actor<feeder_state>*;

void flush(feeder_ptr self) {
  auto& st = self->state;
  if (st.finished.empty())
    return;
  if (auto err = store_outcomes(*st.opts.db, st.fn, st.finished, st.opts.work, st.counts))
    lg->warn("image results not stored function={} count={} error={}; the tasks run again "
             "after the visibility timeout",
             to_string(st.fn), st.finished.size(), self->system().render(err));
  st.finished.clear();
}

void tick_soon(feeder_ptr self, std::chrono::milliseconds after) {
  auto& st = self->state;
  if (st.tick_pending)
    return;
  st.tick_pending = true;
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
  auto counts = persistence::count_image_tasks(*st.opts.db);
  if (!counts)
    return; // the next round counts again; the database's outage is its tracker's to log
  for (auto& f : stats->functions)
    f.queued.store(0, std::memory_order_relaxed);
  for (auto& [name, n] : *counts)
    if (function fn; parse_function(name, fn))
      stats->of(fn).queued.store(n, std::memory_order_relaxed);
}

void feed(feeder_ptr self) {
  auto& st = self->state;
  st.tick_pending = false;
  flush(self);
  count_queue(self);
  if (st.in_flight >= st.slots)
    return; // a finishing task ticks again
  auto parts = st.opts.partitions ? st.opts.partitions() : std::vector<uint32_t>{};
  auto tasks = persistence::take_image_tasks(*st.opts.db, to_string(st.fn), parts,
                                             st.slots - st.in_flight, st.opts.visibility);
  if (!tasks) {
    lg->warn("image tasks not taken function={} error={}", to_string(st.fn),
             self->system().render(tasks.error()));
    tick_soon(self, st.opts.poll * 10);
    return;
  }
  if (tasks->empty()) {
    if (st.in_flight == 0)
      tick_soon(self, st.opts.poll);
    return;
  }
  for (auto& t : *tasks) {
    ++st.in_flight;
    task_key key{st.fn, t.args};
    auto work = st.opts.work;
    self
      ->request(st.pool, caf::infinite, run_atom_v,
                pool_job{[key, work] { return std::any{run_task(key, work)}; }})
      .then(
        [self, t](pool_result& r) {
          auto& s = self->state;
          --s.in_flight;
          s.finished.push_back({t, std::any_cast<task_outcome>(std::move(r.value))});
          if (s.finished.size() >= flush_at || s.in_flight == 0)
            flush(self);
          tick_soon(self, std::chrono::milliseconds{0});
        },
        [self, t](caf::error& err) {
          // The pool refused or the job threw: the task reappears after the visibility
          // timeout (a throw is a bug in computing; logged with its URL).
          --self->state.in_flight;
          lg->warn("image task failed function={} args={} error={}", to_string(self->state.fn),
                   t.args, self->system().render(err));
          tick_soon(self, std::chrono::milliseconds{0});
        });
  }
}

caf::behavior feeder(feeder_ptr self, function fn, pools_options opts, pool_actor pool,
                     size_t slots) {
  self->state.fn = fn;
  self->state.opts = std::move(opts);
  self->state.pool = pool;
  self->state.slots = slots;
  self->link_to(pool); // stopped together
  self->send(self, tick_atom_v);
  self->state.tick_pending = true;
  return {
    [self](tick_atom) { feed(self); },
  };
}

} // namespace

std::vector<caf::actor> spawn_image_pools(caf::actor_system& sys, const pools_options& opts) {
  std::vector<caf::actor> out;
  for (auto fn : {function::rotate, function::preview, function::ratio, function::main_color}) {
    auto w = opts.workers.count(fn) ? opts.workers.at(fn) : 0;
    if (w <= 0)
      continue;
    auto pool =
      spawn_pool(sys, {std::string{"images."} + to_string(fn), w, static_cast<size_t>(w) * 2});
    // Twice the workers: one task runs while the next waits, so a worker never idles on a
    // round trip to PostgreSQL.
    out.push_back(sys.spawn<caf::detached>(feeder, fn, opts, pool, static_cast<size_t>(w) * 2));
  }
  return out;
}

} // namespace gost::images
