#pragma once
// The durable entity kind's parts, shared by its files (not installed): store.cpp (the store
// actor: batched loads, the queue, kept answers), actor.cpp (the entity actor: runs, sends,
// asks, views) and kind.cpp (the kind's traits for the kit's shard, writers, spawn).
// docs/adding-an-actor-type.md describes what they do together.

#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include <caf/fwd.hpp>

#include "gost/core/kit/shard.hpp"
#include "gost/entities/spawn.hpp"

namespace gost::detail {

constexpr size_t max_load_batch = 512;
constexpr size_t due_per_load = 8; ///< events due now read per run (the first is handled)

struct entity_env : kit::entity_env<persistence::entity_write> {
  entity_store_actor store;
  std::shared_ptr<const entity_registry> types;
  uint32_t shard_count = 1;
  std::function<void(uint32_t, const persistence::queue_entries&)> notify;
  std::function<bool(uint32_t)> elsewhere; ///< entity_shard_options::elsewhere
  std::function<void()> forwarded;

  /// A lane's name as the actors' trails point to it (kit::recent_event::lane): interned here,
  /// never removed, so the pointers stay valid while the shard (which holds this env) reads
  /// its actors' trails. Lanes are few (a kind's own handful).
  const std::string* intern_lane(const std::string& lane) {
    std::lock_guard<std::mutex> guard{lanes_mtx};
    return &*lanes.insert(lane).first;
  }

private:
  std::mutex lanes_mtx;
  std::set<std::string> lanes;
};

using entity_env_ptr = caf::intrusive_ptr<entity_env>;

inline std::string kind_of(const std::string& key) {
  return key.substr(0, key.find('/'));
}
inline std::string id_of(const std::string& key) {
  return key.substr(key.find('/') + 1);
}

/// The kit's lane of an entity: its kind and its own lane (so kinds never share a lane).
inline std::string kit_lane(const std::string& kind, const std::string& lane) {
  return kind + "/" + lane;
}

/// A durable entity's actor, spawned by its shard (actor.cpp).
durable_actor spawn_entity_actor(caf::local_actor* parent, std::string key, entity_env_ptr env);

/// The trail of an entity actor given as its abstract_actor (kit::shard_config::trail).
const kit::actor_trail* entity_trail(const void* actor);

} // namespace gost::detail
