#include "gost/core/call_hub.hpp"

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "gost/core/protocol.hpp"

CAF_ADD_ATOM(gost_core, gost::detail, call_atom, "call")
CAF_ADD_ATOM(gost_core, gost::detail, park_atom, "park")

namespace gost {

namespace {

struct hub_state {
  static inline const char* name = "gost.call_hub";
  std::vector<call_hub::job> parked;
  bool armed = false;
  size_t index = 0; ///< which of the hub's actors
};

// `index` only so that the spawn passes an argument: CAF 0.17.6 dereferences a null argument
// tuple when a spawned function takes none (UBSan stops there in the unit tier).
caf::behavior hub_actor(caf::stateful_actor<hub_state>* self, size_t index) {
  self->state.index = index;
  return {
    [=](detail::call_atom, call_hub::job& j) { j(self); },
    [=](detail::park_atom, call_hub::job& j) {
      auto& st = self->state;
      st.parked.push_back(std::move(j));
      if (!st.armed) {
        st.armed = true;
        self->delayed_send(self, call_hub::pause, tick_atom_v);
      }
    },
    [=](tick_atom) {
      auto& st = self->state;
      st.armed = false;
      auto due = std::move(st.parked);
      st.parked.clear();
      for (auto& j : due)
        j(self);
    },
  };
}

} // namespace

call_hub::call_hub(caf::actor_system& sys, size_t actors, size_t blocking_threads) {
  for (size_t i = 0; i < std::max<size_t>(1, actors); ++i)
    actors_.push_back(sys.spawn(hub_actor, i));
  for (size_t i = 0; i < std::max<size_t>(1, blocking_threads); ++i)
    blocking_threads_.emplace_back([this] { blocking_loop(); });
}

call_hub::~call_hub() {
  for (auto& a : actors_)
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  {
    std::lock_guard<std::mutex> guard{blocking_mtx_};
    stopping_ = true;
  }
  blocking_cv_.notify_all();
  for (auto& t : blocking_threads_)
    t.join();
}

void call_hub::blocking_loop() {
  std::unique_lock<std::mutex> lock{blocking_mtx_};
  for (;;) {
    blocking_cv_.wait(lock, [this] { return stopping_ || !blocking_jobs_.empty(); });
    if (blocking_jobs_.empty())
      return; // stopping, and every job handed over ran
    auto f = std::move(blocking_jobs_.front());
    blocking_jobs_.pop_front();
    lock.unlock();
    f();
    lock.lock();
  }
}

size_t call_hub::blocking_backlog() const {
  std::lock_guard<std::mutex> guard{blocking_mtx_};
  return blocking_jobs_.size();
}

void call_hub::run(job j) {
  auto& a = actors_[next_.fetch_add(1, std::memory_order_relaxed) % actors_.size()];
  caf::anon_send(a, detail::call_atom_v, std::move(j));
}

void call_hub::run_blocking(std::function<void()> f) {
  {
    std::lock_guard<std::mutex> guard{blocking_mtx_};
    blocking_jobs_.push_back(std::move(f));
  }
  blocking_cv_.notify_one();
}

void call_hub::run_blocking_on_worker(std::function<void(caf::event_based_actor*)> f) {
  // `f` goes as spawn's argument, like hub_actor's index: CAF 0.17.6 dereferences a null
  // argument tuple when a spawned function takes none (UBSan, preset dev).
  run([f = std::move(f)](caf::event_based_actor* self) {
    self->system().spawn<caf::detached>(
      [](caf::event_based_actor* worker, const std::function<void(caf::event_based_actor*)>& g) {
        g(worker);
      },
      f);
  });
}

void call_hub::later(caf::event_based_actor* self, job j) {
  self->send(self, detail::park_atom_v, std::move(j));
}

} // namespace gost
