// The kinds a node hosts on its shards (cluster/kinds.hpp), registered before the cluster
// manager starts any shard: offers (every node), then durable entities (a node whose
// application registered entity types), in the slots cluster/builtin_kinds.hpp names. Here,
// once, is where the `queue.*`, `offer.*`, `entity.*`, `stage.*` and `rescan.*` sections become
// the kinds' shard options (`write.*` went to the writers, start_actors.cpp). A kind of its
// own is one more `routes->kinds().add(...)`: the router, the manager, the node link and the
// node's start iterate the table.

#include <stdexcept>

#include <caf/actor_cast.hpp>
#include <caf/send.hpp>

#include "cluster/builtin_kinds.hpp"
#include "gost/core/kit/protocol.hpp"
#include "node/limits.hpp"
#include "node/start.hpp"

namespace gost::runtime {

namespace {

/// What every shard supervisor of this node shares: the kit's part, the same for every kind.
kit::shard_config kit_defaults(const node_context& n) {
  auto& c = n.cfg;
  kit::shard_config k;
  k.queue_lookahead = c.queue.lookahead;
  k.queue_poll = c.queue.poll;
  k.queue_poll_idle = c.queue.poll_idle;
  k.queue_page = c.queue.page;
  k.queue_prefetch = c.queue.prefetch;
  k.db = n.db;
  k.trace = n.traces->hub;
  k.recent_events = c.console.recent_events;
  k.drain_timeout = c.cluster.drain_timeout;
  return k;
}

shard_options shard_defaults(const node_context& n) {
  auto& c = n.cfg;
  shard_options so;
  so.kit = kit_defaults(n);
  so.kit.idle_timeout = c.offer.idle_timeout;
  so.kit.max_resident = c.offer.max_resident;
  so.kit.max_attempts = c.stage.max_attempts;
  so.node_id = c.node.id;
  so.stages = n.stages;
  so.pools = n.pools;
  so.stats = n.stats;
  so.max_chain = c.stage.max_chain;
  so.rescan_every = c.rescan.interval;
  so.rescan_page = c.rescan.page;
  so.sweeps = n.sweeps;
  so.limits = offer_limits_of(c.limits);
  return so;
}

/// What every entity shard supervisor of this node shares: the kit's part with the `entity.*`
/// section's passivation.
entity_shard_options entity_shard_defaults(const node_context& n) {
  auto& c = n.cfg;
  entity_shard_options eo;
  eo.kit = kit_defaults(n);
  eo.kit.idle_timeout = c.entity.idle_timeout;
  eo.kit.max_resident = c.entity.max_resident;
  eo.kit.stats = n.entity_stats;
  eo.shard_count = c.shard.count;
  eo.types = n.ext.entity_types;
  // Events for entities of other shards this node owns reach them at once; other nodes'
  // shards are woken (a NOTIFY, cluster/wakes.hpp).
  // Weak: this closure lives in the router's kind table (a strong pointer would keep the
  // router, and the handles it holds, alive past the node's stop).
  eo.notify = [weak = std::weak_ptr<router>(n.routes), wakes = std::weak_ptr<wake_hub>(n.wakes)](
                uint32_t shard, const persistence::queue_entries& entries) {
    auto routes = weak.lock();
    if (!routes)
      return;
    if (auto local = routes->local(kinds::entities, shard))
      caf::anon_send(*local, enqueued_atom_v, entries,
                     static_cast<uint8_t>(kit::event_source::api));
    else if (auto w = wakes.lock())
      w->wake(kinds::entities_name, shard);
  };
  return eo;
}

} // namespace

void register_kinds(node_context& n) {
  auto& table = n.routes->kinds();
  auto offers = make_shard_kind<offer_owner_ops>(
    kinds::offers_name,
    [&n, base = shard_defaults(n)](const shard_lease& l) {
      auto so = base;
      so.kit.shard = l.shard;
      so.kit.epoch = l.epoch;
      so.kit.paused = *l.paused;
      auto& g = n.part_for(l.group); // the lease's group's database (ADR 0023)
      so.kit.db = g.db;
      so.store = g.stores[l.shard % g.stores.size()];
      so.writer = kit::writer_for(g.writers, l.shard);
      auto shard = caf::actor_cast<caf::actor>(spawn_shard(*l.sys, std::move(so)));
      if (n.spawn_scheduled_worker) // stops when the shard's offer supervisor does
        n.spawn_scheduled_worker(l.shard, l.group, l.epoch, shard);
      return shard;
    },
    [](const std::string& id) { return !kinds::is_entity_key(id); });
  offers.forwarded = true;
  offers.pausable = true;
  auto offers_slot = table.add<offer_owner_ops, shard_actor>(std::move(offers));

  auto entities = make_shard_kind<entity_owner_ops>(
    kinds::entities_name,
    [&n, base = entity_shard_defaults(n)](const shard_lease& l) -> caf::actor {
      auto& g = n.part_for(l.group); // the lease's group's database (ADR 0023)
      if (g.entity_stores.empty())   // no entity types: no supervisor
        return {};
      auto eo = base;
      eo.kit.shard = l.shard;
      eo.kit.epoch = l.epoch;
      eo.kit.db = g.db;
      eo.store = g.entity_stores[l.shard % g.entity_stores.size()];
      eo.writer = kit::writer_for(g.entity_writers, l.shard);
      eo.kit.write_slot = n.entity_write_stats->slot_for(l.shard);
      eo.kit.figures = n.stats->entity_shards.open(l.shard);
      if (g.entity_forwarder) {
        // Several groups (ADR 0023): an event to an entity of another group is kept here for
        // the group's forwarder, woken after the commit.
        eo.elsewhere = [weak = std::weak_ptr<router>(n.routes), group = l.group](uint32_t s) {
          auto routes = weak.lock();
          return !routes || routes->group_of(s) != group; // unsure: forwarding is always safe
        };
        eo.forwarded = [fwd = caf::actor_cast<caf::actor_addr>(g.entity_forwarder)] {
          if (auto f = caf::actor_cast<entity_forwarder_actor>(fwd))
            caf::anon_send(f, wake_atom_v);
        };
      }
      return caf::actor_cast<caf::actor>(spawn_entity_shard(*l.sys, std::move(eo)));
    },
    &kinds::is_entity_key);
  entities.forwarded = true;
  auto entities_slot = table.add<entity_owner_ops, entity_shard_actor>(std::move(entities));
  // The shorthands of the API and the node's parts route by these slots.
  if (offers_slot.index != kinds::offers.index || entities_slot.index != kinds::entities.index)
    throw std::logic_error(
      "the built-in kinds registered out of order (cluster/builtin_kinds.hpp)");
}

} // namespace gost::runtime
