// The shard supervisor: owns the offer actors of one shard. It spawns an offer actor on the
// first event for an offer, forwards events to it with `delegate` (the offer actor answers the
// original requester directly), forgets it when it passivates or dies.

#include <random>
#include <unordered_map>

#include <caf/actor_system.hpp>
#include <caf/system_messages.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include "gost/actors/spawn.hpp"
#include "offer_actor.hpp"

namespace gost {

namespace {

struct shard_state {
  static inline const char* name = "gost.shard";
  shard_options opts;
  std::unordered_map<std::string, offer_actor> children;
  std::unordered_map<caf::actor_addr, std::string> ids;
};

using self_ptr = shard_actor::stateful_pointer<shard_state>;

offer_actor child(self_ptr self, const std::string& id) {
  auto& st = self->state;
  auto i = st.children.find(id);
  if (i != st.children.end())
    return i->second;
  detail::offer_actor_args args;
  args.id = id;
  args.shard = st.opts.shard;
  args.parent = self;
  args.store = st.opts.store;
  args.idle_timeout = st.opts.offer_idle_timeout;
  auto a = detail::spawn_offer_actor(self, std::move(args));
  st.ids.emplace(a.address(), id);
  st.children.emplace(id, a);
  st.opts.stats->offer_actors_spawned.fetch_add(1, std::memory_order_relaxed);
  st.opts.stats->resident_offer_actors.fetch_add(1, std::memory_order_relaxed);
  return a;
}

void forget(self_ptr self, const caf::actor_addr& addr) {
  auto& st = self->state;
  auto i = st.ids.find(addr);
  if (i == st.ids.end())
    return;
  st.children.erase(i->second);
  st.ids.erase(i);
  st.opts.stats->resident_offer_actors.fetch_sub(1, std::memory_order_relaxed);
}

shard_actor::behavior_type shard_fun(self_ptr self, shard_options opts) {
  self->state.opts = std::move(opts);
  // Offer actors are linked to their shard. Their exits arrive here; any other exit message
  // (the node stopping the shard) stops the shard, and the links take the offer actors along.
  self->set_exit_handler([=](caf::exit_msg& em) {
    auto& st = self->state;
    auto i = st.ids.find(em.source);
    if (i == st.ids.end()) {
      self->quit(em.reason);
      return;
    }
    if (em.reason && em.reason != caf::exit_reason::normal) {
      st.opts.stats->offer_actors_crashed.fetch_add(1, std::memory_order_relaxed);
      spdlog::warn("offer actor stopped abnormally shard={} offer={} reason={}", st.opts.shard,
                   i->second, self->system().render(em.reason));
    }
    forget(self, em.source);
  });
  return {
    [=](create_atom a, offer_msg& m) {
      auto id = m.value.id();
      return self->delegate(child(self, id), a, std::move(m));
    },
    [=](get_atom a, const std::string& id) { return self->delegate(child(self, id), a, id); },
    [=](update_atom a, offer_msg& m, int64_t expected) {
      auto id = m.value.id();
      return self->delegate(child(self, id), a, std::move(m), expected);
    },
    [=](delete_atom a, const std::string& id, int64_t expected) {
      return self->delegate(child(self, id), a, id, expected);
    },
    [=](passivate_atom, const std::string& id) {
      auto& st = self->state;
      auto i = st.children.find(id);
      if (i == st.children.end()
          || i->second.address() != caf::actor_cast<caf::actor_addr>(self->current_sender()))
        return; // a stale request from an actor already replaced
      auto a = i->second;
      self->unlink_from(a); // its normal exit is no news to us
      forget(self, a.address());
      st.opts.stats->offer_actors_passivated.fetch_add(1, std::memory_order_relaxed);
      self->send(a, passivate_atom::value, ok_atom::value);
    },
  };
}

} // namespace

shard_actor spawn_shard(caf::actor_system& sys, shard_options opts) {
  return sys.spawn(shard_fun, std::move(opts));
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
