// The actor pool: a scheduled (event-based) front actor owning the queue, the limits and the
// counters, and `workers` detached actors (a thread each) that run one job at a time. The
// front never blocks: it hands a job to an idle worker and answers the requester when the
// worker reports back.

#include "gost/core/actor_pool.hpp"

#include <algorithm>
#include <deque>
#include <vector>

#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "gost/core/errc.hpp"
#include "gost/core/unavailable.hpp"

namespace gost {

namespace {

using clock_type = std::chrono::steady_clock;

using worker_actor = caf::typed_actor<caf::replies_to<run_atom, pool_job>::with<pool_result>>;
using pool_impl = pool_actor::extend<caf::reacts_to<pump_atom>>;

worker_actor::behavior_type worker_fun(worker_actor::pointer, std::string name) {
  return {
    [name](run_atom, pool_job& job) -> caf::result<pool_result> {
      try {
        return pool_result{job.fn()};
      } catch (const unavailable_error& e) {
        return make_error(errc::unavailable, e.what());
      } catch (const std::exception& e) {
        return make_error(errc::internal, "job in pool " + name + " failed: " + e.what());
      } catch (...) {
        return make_error(errc::internal, "job in pool " + name + " failed");
      }
    },
  };
}

constexpr size_t latency_window = 1024;

struct pool_state {
  static inline const char* name = "gost.pool";
  pool_options opts;
  std::vector<worker_actor> idle;
  struct pending {
    pool_job job;
    caf::typed_response_promise<pool_result> rp;
  };
  std::deque<pending> queue;
  pool_stats stats;
  std::vector<double> latencies_ms; ///< ring of the last `latency_window` run times
  size_t latency_next = 0;
  double tokens = 0;
  clock_type::time_point refilled{};
  bool pump_scheduled = false;

  ~pool_state() {
    // A stopping pool answers what it will never run, so no requester waits forever.
    for (auto& p : queue)
      p.rp.deliver(make_error(errc::unavailable, "pool " + opts.name + " stopped"));
  }
};

using self_ptr = pool_impl::stateful_pointer<pool_state>;

int parallelism(const pool_options& o) {
  return o.max_parallelism > 0 ? std::min(o.max_parallelism, o.workers) : o.workers;
}

void record(pool_state& st, double ms) {
  if (st.latencies_ms.size() < latency_window)
    st.latencies_ms.push_back(ms);
  else
    st.latencies_ms[st.latency_next] = ms;
  st.latency_next = (st.latency_next + 1) % latency_window;
}

void pump(self_ptr self);

void start(self_ptr self, pool_state::pending p) {
  auto& st = self->state;
  auto w = st.idle.back();
  st.idle.pop_back();
  ++st.stats.running;
  auto t0 = clock_type::now();
  auto rp = p.rp;
  self->request(w, caf::infinite, run_atom_v, std::move(p.job))
    .then(
      [=](pool_result& r) mutable {
        auto& s = self->state;
        record(s, std::chrono::duration<double, std::milli>(clock_type::now() - t0).count());
        ++s.stats.completed;
        --s.stats.running;
        s.idle.push_back(w);
        rp.deliver(std::move(r));
        pump(self);
      },
      [=](caf::error& err) mutable {
        auto& s = self->state;
        record(s, std::chrono::duration<double, std::milli>(clock_type::now() - t0).count());
        ++s.stats.failed;
        --s.stats.running;
        s.idle.push_back(w);
        rp.deliver(std::move(err));
        pump(self);
      });
}

/// Starts queued jobs while a worker is idle, parallelism allows and the rate limit has a
/// token; when only the rate limit holds them back, comes back when the next token is due.
void pump(self_ptr self) {
  auto& st = self->state;
  auto rate = st.opts.rate_limit;
  while (!st.queue.empty() && !st.idle.empty()
         && st.stats.running < static_cast<uint64_t>(parallelism(st.opts))) {
    if (rate > 0) {
      auto now = clock_type::now();
      auto cap = std::max(1.0, rate / 10); // at most a tenth of a second's burst
      st.tokens =
        std::min(cap, st.tokens + std::chrono::duration<double>(now - st.refilled).count() * rate);
      st.refilled = now;
      if (st.tokens < 1) {
        if (!st.pump_scheduled) {
          st.pump_scheduled = true;
          auto wait = std::chrono::duration<double>((1 - st.tokens) / rate);
          self->delayed_send(self, std::chrono::duration_cast<std::chrono::microseconds>(wait),
                             pump_atom_v);
        }
        return;
      }
      st.tokens -= 1;
    }
    auto p = std::move(st.queue.front());
    st.queue.pop_front();
    --st.stats.queued;
    start(self, std::move(p));
  }
}

double percentile(std::vector<double> v, double p) {
  if (v.empty())
    return 0;
  auto i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(i), v.end());
  return v[i];
}

pool_impl::behavior_type pool_fun(self_ptr self, pool_options opts) {
  auto& st = self->state;
  opts.workers = std::max(1, opts.workers);
  st.opts = std::move(opts);
  st.stats.name = st.opts.name;
  st.refilled = clock_type::now();
  st.tokens = st.opts.rate_limit > 0 ? 1 : 0;
  for (int i = 0; i < st.opts.workers; ++i)
    st.idle.push_back(self->spawn<caf::detached + caf::linked>(worker_fun, st.opts.name));
  return {
    [=](run_atom, pool_job& job) -> caf::result<pool_result> {
      auto& s = self->state;
      ++s.stats.submitted;
      if (s.queue.size() >= s.opts.queue_capacity) {
        ++s.stats.rejected;
        return make_error(errc::overloaded, "pool " + s.opts.name + " is full ("
                                              + std::to_string(s.opts.queue_capacity)
                                              + " jobs waiting); retry later");
      }
      auto rp = self->make_response_promise<pool_result>();
      s.queue.push_back({std::move(job), rp});
      ++s.stats.queued;
      pump(self);
      return rp;
    },
    [=](get_atom) {
      auto& s = self->state;
      auto out = s.stats;
      out.p50_ms = percentile(s.latencies_ms, 0.5);
      out.p99_ms = percentile(s.latencies_ms, 0.99);
      return out;
    },
    [=](pump_atom) {
      self->state.pump_scheduled = false;
      pump(self);
    },
  };
}

} // namespace

pool_actor spawn_pool(caf::actor_system& sys, pool_options opts) {
  return caf::actor_cast<pool_actor>(sys.spawn(pool_fun, std::move(opts)));
}

} // namespace gost
