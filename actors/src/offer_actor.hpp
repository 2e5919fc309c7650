#pragma once
// Internal: the offer actor, spawned by shard supervisors only.

#include <chrono>
#include <string>

#include "gost/actors/protocol.hpp"

namespace gost::detail {

struct offer_actor_args {
  std::string id;
  uint32_t shard = 0;
  shard_actor parent;
  store_actor store;
  std::chrono::milliseconds idle_timeout{};
};

offer_actor spawn_offer_actor(caf::local_actor* parent, offer_actor_args args);

} // namespace gost::detail
