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
};

caf::behavior hub_actor(caf::stateful_actor<hub_state>* self) {
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

call_hub::call_hub(caf::actor_system& sys, size_t actors) {
  for (size_t i = 0; i < std::max<size_t>(1, actors); ++i)
    actors_.push_back(sys.spawn(hub_actor));
}

call_hub::~call_hub() {
  for (auto& a : actors_)
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

void call_hub::run(job j) {
  auto& a = actors_[next_.fetch_add(1, std::memory_order_relaxed) % actors_.size()];
  caf::anon_send(a, detail::call_atom_v, std::move(j));
}

void call_hub::run_blocking(std::function<void()> f) {
  run([f = std::move(f)](caf::event_based_actor* self) {
    self->system().spawn<caf::detached>([f](caf::event_based_actor* worker) {
      f();
      worker->quit();
    });
  });
}

void call_hub::run_blocking_on_worker(std::function<void(caf::event_based_actor*)> f) {
  run([f = std::move(f)](caf::event_based_actor* self) { self->system().spawn<caf::detached>(f); });
}

void call_hub::later(caf::event_based_actor* self, job j) {
  self->send(self, detail::park_atom_v, std::move(j));
}

} // namespace gost
