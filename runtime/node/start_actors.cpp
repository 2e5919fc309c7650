// The actor system and the actors every other part uses: store actors, the offers' writers,
// the stage pools, the call hub and the routing table; the store and writer of the
// application's actor types. Shard supervisors are not started here: the cluster manager
// starts those whose leases it takes.

#include <algorithm>
#include <future>

#include "cluster/builtin_kinds.hpp"
#include "cluster/placement.hpp"
#include "gost/entities/protocol.hpp"
#include "gost/entities/spawn.hpp"
#include "gost/offers/protocol.hpp"
#include "gost/tasks/protocol.hpp"
#include "node/start.hpp"

namespace gost::runtime {

caf::error start_actor_system(node_context& n) {
  auto& cfg = n.cfg.scheduler;
  n.caf_cfg = std::make_unique<caf::actor_system_config>();
  // Every domain's block (each at its own start: gost/core/type_ids.hpp).
  register_offer_types(*n.caf_cfg);
  register_entity_types(*n.caf_cfg);
  tasks::register_task_types(*n.caf_cfg);
  n.caf_cfg->set("scheduler.max-threads", static_cast<size_t>(cfg.threads));
  n.caf_cfg->set("scheduler.policy",
                 cfg.policy == "stealing" ? caf::atom("stealing") : caf::atom("sharing"));
  n.caf_cfg->set("logger.verbosity", caf::atom("quiet"));
  n.sys = std::make_unique<caf::actor_system>(*n.caf_cfg);
  // Its destructor waits for every actor: the parts above stopped theirs first.
  n.stops.push("actor system", [&n] {
    n.sys.reset();
    n.caf_cfg.reset();
  });
  return {};
}

caf::error start_core_actors(node_context& n) {
  // Each shard group's database has its stores and writers (ADR 0023).
  for (auto& part : n.groups) {
    auto& g = *part;
    for (int i = 0; i < n.cfg.pg.pool_size; ++i)
      g.stores.push_back(spawn_store(*n.sys, *g.pool, n.stats));
    n.stops.push("store actors", [&n, &g] {
      n.stop_actors(g.stores);
      g.stores.clear();
    });
    // Writers matched to connections: two share a 4-connection pool with the stores.
    auto& write = n.cfg.write;
    // The home-shard checks of new offers and key changes (ADR 0023 "Splits") only where a
    // split can happen while this node runs: a move needs its target group opened by every
    // node at its start, so a node of one group never sees one. They lock other nodes' lease
    // rows; a single-group installation does not pay for them.
    uint32_t home_checks = n.groups.size() > 1 ? n.cfg.shard.count : 0;
    g.writers = spawn_offer_writers(*n.sys, *g.pool, n.cfg.node.id,
                                    static_cast<size_t>(std::max(1, n.cfg.pg.pool_size / 2)),
                                    write.batch_max, write.flush_delay, n.stats, g.db,
                                    n.cfg.history.retention.count() > 0, home_checks);
    n.stops.push("offer writers", [&n, &g] {
      n.stop_actors(g.writers);
      g.writers.clear();
    });
  }
  n.pools = spawn_stage_pools(*n.sys, *n.stages);
  n.stops.push("stage pools", [&n] {
    std::vector<pool_actor> pools;
    for (auto& [id, p] : *n.pools)
      pools.push_back(p);
    n.stop_actors(pools);
    n.pools.reset();
  });
  // Blocking jobs (PostgreSQL reads of the API) each hold a connection of the pool while they
  // run: a thread more than the pool has, so a job is ready when a connection frees.
  n.hub =
    std::make_unique<call_hub>(*n.sys, static_cast<size_t>(std::max(2, n.cfg.scheduler.threads)),
                               static_cast<size_t>(n.cfg.pg.pool_size) + 1);
  n.stops.push("call hub", [&n] { n.hub.reset(); });
  // The offers' (cluster/builtin_kinds.hpp: any_offer_store): the catalog database's, group
  // 0's, for the lookups that are not by id (ADR 0023 build step 4 spreads them).
  std::vector<caf::actor> stores;
  for (auto& s : n.groups.front()->stores)
    stores.push_back(caf::actor_cast<caf::actor>(s));
  std::vector<uint32_t> group_of;
  for (auto* part : n.part_by_shard)
    group_of.push_back(part->group.id);
  // Every declared group has an id below `groups`: a range can move to any of them.
  uint32_t groups = 1;
  for (auto& part : n.groups)
    groups = std::max(groups, part->group.id + 1);
  n.routes =
    std::make_shared<router>(n.cfg.shard.count, std::move(stores), std::move(group_of), groups);
  for (auto& part : n.groups) {
    std::vector<caf::actor> of_group;
    for (auto& s : part->stores)
      of_group.push_back(caf::actor_cast<caf::actor>(s));
    n.routes->set_group_stores(part->group.id, std::move(of_group));
  }
  // The table holds handles of the stores and of other nodes' links: released before the
  // actor system waits for them.
  n.stops.push("routing table", [&n] { n.routes.reset(); });
  {
    std::vector<std::pair<uint32_t, persistence::pg_pool*>> pools;
    for (auto& part : n.groups)
      pools.emplace_back(part->group.id, part->pool);
    std::vector<uint32_t> at_start;
    for (auto* part : n.part_by_shard)
      at_start.push_back(part->group.id);
    n.placement = routed_placement(n.routes, std::move(pools), std::move(at_start));
  }
  // Wake notices to and from other nodes (cluster/wakes.hpp): the cluster manager's listener
  // hands it what it hears; stopped (its last notices sent) before the pool goes.
  n.wakes = std::make_shared<wake_hub>(*n.pool, n.routes);
  n.stops.push("wake notices", [&n] { n.wakes->stop(); });
  n.pg_images = std::make_unique<pg_image_tasks>(n.wakes);
  n.registry->add([weak = std::weak_ptr<const wake_hub>(n.wakes)](metric_families& out) {
    auto w = weak.lock();
    if (!w)
      return;
    const char* name = "gost_wake_notices_total";
    const char* help = "Wake notices: work written for a shard behind its owner's back (a "
                       "requeue, an entity's event, a scheduled action), sent to the other "
                       "nodes (NOTIFY) or heard from them.";
    out.add(name, stat_kind::counter, help, {{"direction", "sent"}},
            static_cast<int64_t>(w->sent()));
    out.add(name, stat_kind::counter, help, {{"direction", "heard"}},
            static_cast<int64_t>(w->heard_count()));
  });
  // Calls refused because the node could not confirm its shard leases (router.hpp).
  n.registry->add([weak = std::weak_ptr<const router>(n.routes)](metric_families& out) {
    auto r = weak.lock();
    if (!r)
      return;
    // One series per shard group when there are several (label `group`, ADR 0023).
    auto now = lease_confirmation::clock::now();
    for (uint32_t g = 0; g < r->group_count(); ++g) {
      auto& c = r->confirmation(g);
      metric_labels labels;
      if (r->group_count() > 1)
        labels = {{"group", std::to_string(g)}};
      out.add("gost_lease_unconfirmed_refusals_total", stat_kind::counter,
              "Calls for shards owned here refused UNAVAILABLE because the node could not "
              "confirm its shard leases (no heartbeat renewed them within the lease timeout "
              "less one heartbeat, or its liveness session to PostgreSQL was lost).",
              labels, static_cast<int64_t>(c.refusals()));
      out.add("gost_leases_confirmed", stat_kind::gauge,
              "1 while the node's shard leases are confirmed (its shards are served), else 0.",
              labels, c.confirmed(now) ? 1 : 0);
    }
  });
  // The offers' figures, and the stage engine's and Kafka's (node_stats::visit: gost_offer_*,
  // gost_outbox_*, gost_after_save_*); the offer shards' and writers' own.
  n.registry->add_stats<node_stats>("gost_", n.stats);
  kit::add_shard_metrics(*n.registry, "gost_offer_shard_",
                         member_of(n.stats, n.stats->offer_shards));
  kit::add_writer_metrics(*n.registry, "gost_offer_", member_of(n.stats, n.stats->offer_writes));
  return {};
}

caf::error start_entity_actors(node_context& n) {
  if (!n.hosts_entities())
    return {};
  for (auto& part : n.groups) {
    auto& g = *part;
    g.entity_stores.push_back(spawn_entity_store(*n.sys, *g.pool));
    n.stops.push("entity stores", [&n, &g] {
      n.stop_actors(g.entity_stores);
      g.entity_stores.clear();
    });
    g.entity_writers =
      spawn_entity_writers(*n.sys, *g.pool, n.cfg.node.id, 1, n.cfg.write.batch_max,
                           n.cfg.write.flush_delay, n.entity_write_stats, g.db);
    n.stops.push("entity writers", [&n, &g] {
      n.stop_actors(g.entity_writers);
      g.entity_writers.clear();
    });
  }
  // The durable entities' figures: all kinds (gost_entity_actors_*, gost_entity_write_*), and
  // per kind and lane summed over the node's entity shards (gost_entity_kind_*,
  // gost_entity_lane_*; tasks are the kinds task.<type>).
  auto& reg = *n.registry;
  reg.add_stats<kit::entity_stats>("gost_entity_", n.entity_stats);
  reg.add_stats<kit::writer_stats>("gost_entity_", n.entity_write_stats);
  kit::add_writer_metrics(reg, "gost_entity_", n.entity_write_stats);
  std::vector<std::string> kinds;
  for (auto& t : n.ext.entity_types->all())
    kinds.push_back(t->kind());
  kit::add_entity_kind_metrics(reg, "gost_entity_", member_of(n.stats, n.stats->entity_shards),
                               std::move(kinds));
  return start_entity_forwarders(n);
}

caf::error start_entity_forwarders(node_context& n) {
  if (n.groups.size() < 2)
    return {}; // one database: every event an entity sends is stored where its target lives
  // An event sent to an entity of another group is kept in the sender's database and relayed
  // through the Send path (ADR 0023) with the row's request id (stored once at the target).
  auto timeout =
    std::min<std::chrono::milliseconds>(n.cfg.api.request_timeout, std::chrono::seconds{10});
  for (auto& part : n.groups) {
    auto& g = *part;
    entity_forwarder_options fo;
    fo.pool = g.pool;
    fo.group = g.group.name;
    fo.shards = [routes = n.routes, group = g.group.id] { return routes->local_shards(group); };
    fo.deliver = [hub = n.hub.get(), routes = n.routes,
                  timeout](const std::string& key, const std::string& payload,
                           const std::string& request_id, int64_t delay_ms) {
      auto done = std::make_shared<std::promise<caf::error>>();
      auto f = done->get_future();
      any_msg event;
      if (!event.value.ParseFromString(payload)) {
        done->set_value(make_error(errc::invalid_argument, "a kept event is not a serialized Any"));
        return f;
      }
      auto deadline = clock_type::now() + timeout;
      hub->run([=, &r = *routes](caf::event_based_actor* self) {
        ask_entity_owner(
          self, r, deadline, [done](ok_atom) { done->set_value({}); },
          [done](const caf::error& e) { done->set_value(e); }, send_atom_v, key, event, request_id,
          delay_ms);
      });
      return f;
    };
    n.registry->add([stats = fo.stats, group = g.group.name](metric_families& out) {
      const char* name = "gost_entity_forwards_total";
      const char* help = "Events entities sent to entities of another shard group, relayed by "
                         "this node (kept in entity_forwards, sent through EntityService.Send): "
                         "relayed, failed (retried later: the row keeps its last error), or "
                         "given_up (refused for good by the target: in entity_dead_letters).";
      out.add(name, stat_kind::counter, help, {{"group", group}, {"outcome", "relayed"}},
              static_cast<int64_t>(stats->relayed.load(std::memory_order_relaxed)));
      out.add(name, stat_kind::counter, help, {{"group", group}, {"outcome", "failed"}},
              static_cast<int64_t>(stats->failed.load(std::memory_order_relaxed)));
      out.add(name, stat_kind::counter, help, {{"group", group}, {"outcome", "given_up"}},
              static_cast<int64_t>(stats->given_up.load(std::memory_order_relaxed)));
    });
    g.entity_forwarder = spawn_entity_forwarder(*n.sys, std::move(fo));
    n.stops.push("entity forwarder", [&n, &g] { n.stop_actor(g.entity_forwarder); });
  }
  return {};
}

} // namespace gost::runtime
