// The cluster side of a node, in three steps of the start order: the manager (idle) and the
// node links' credentials, the node link server, and joining (registration, leases, shards).
// Their stops run in reverse: the hand-off first, while everything still serves; the node
// link server and the manager last, after the public API finished its calls (which the
// manager's peer links may be forwarding).

#include <algorithm>
#include <utility>

#include "cluster/manager.hpp"
#include "cluster/wakes.hpp"
#include "gost/core/errc.hpp"
#include "gost/core/log.hpp"
#include "gost/persistence/cluster/groups.hpp"
#include "gost/persistence/cluster/leases.hpp"
#include "node/limits.hpp"
#include "node/start.hpp"

namespace gost::runtime {

namespace {

const auto lg = gost::log::get("cluster");

/// The stop of join_cluster: every shard handed to the other nodes (drained: its offer actors
/// finish and commit; then the lease is released) while this node still answers requests,
/// which follow the shards to their new owners. Then, when other nodes run, a bounded wait
/// until this node's routing table shows new owners for the released shards, so calls still
/// in flight here are forwarded instead of paused.
void hand_off(node_context& n) {
  auto& cfg = n.cfg;
  auto released = n.routes->local_shards();
  {
    caf::scoped_actor self{*n.sys};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      n.stop_deadline - std::chrono::system_clock::now());
    self->request(n.manager, std::max(left, std::chrono::milliseconds{1}), leave_atom_v)
      .receive([](ok_atom) {},
               [](caf::error& err) {
                 lg->warn("shard hand-off incomplete at stop error={}; leases expire instead",
                          error_message(err));
               });
  }
  auto nodes = persistence::list_nodes(*n.pool, cfg.cluster.lease_timeout);
  bool others = nodes && std::any_of(nodes->begin(), nodes->end(), [&](auto& o) {
                  return o.alive && o.node_id != cfg.node.id;
                });
  if (!others || released.empty())
    return;
  // Another node takes a released lease on the release's notification or at its next
  // heartbeat; this node's manager sees the owner at its own next one: two heartbeats.
  auto budget = std::min({cfg.cluster.heartbeat * 2, std::chrono::milliseconds{2000},
                          std::chrono::duration_cast<std::chrono::milliseconds>(
                            n.stop_deadline - std::chrono::system_clock::now())});
  auto t0 = std::chrono::steady_clock::now();
  bool owned = n.routes->wait_remote(released, t0 + budget);
  auto waited =
    std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
      .count();
  if (owned)
    lg->info("released shards owned by other nodes count={} waited_ms={}", released.size(), waited);
  else
    lg->warn("released shards without a known new owner after {} ms count={}; calls for them "
             "pause and re-route",
             waited, released.size());
}

/// Called by the catalog group's manager at every look (its heartbeat, and the notices on
/// `gost_groups`): when the map's version grew (a move switched a range, ADR 0023 decision 5),
/// the shards that changed group route to their new group's confirmation and stores, and each
/// group's manager is given its shards (the source's stop theirs, the target's take the
/// leases). On the manager's thread; the only writer of the map and the parts' shard lists
/// after the start.
void follow_map(node_context& n) {
  auto version = persistence::group_map_version(*n.pool);
  if (!version || !n.group_map || *version <= n.group_map->version())
    return; // unreadable now: the next look tries again
  auto map = persistence::load_group_map(*n.pool, n.cfg.shard.count);
  if (!map) {
    lg->warn("the shard group map changed but cannot be read error={}; the last one stays",
             error_message(map.error()));
    return;
  }
  uint32_t moved = 0;
  for (uint32_t shard = 0; shard < n.cfg.shard.count; ++shard) {
    auto g = map->range_of(shard).group;
    if (g == n.routes->group_of(shard))
      continue;
    if (g >= n.routes->group_count()) {
      lg->error("shard moved to a group this node has no part for shard={} group={}; restart "
                "the node (it opens the groups declared at its start)",
                shard, g);
      continue;
    }
    n.routes->set_group_of(shard, g);
    ++moved;
  }
  for (auto& part : n.groups) {
    auto shards = map->shards_of(part->group.id);
    if (shards == part->shards)
      continue;
    lg->info("shard group changed group={} name={} shards={} before={}", part->group.id,
             part->group.name, shards.size(), part->shards.size());
    part->shards = shards;
    if (part->manager)
      set_manager_shards(part->manager, std::move(shards));
  }
  lg->info("shard group map now version={} before={} shards_moved={}", map->version(),
           n.group_map->version(), moved);
  n.group_map = std::move(*map);
}

} // namespace

caf::error start_cluster_manager(node_context& n) {
  auto security = link_security::load(n.cfg.cluster);
  if (!security)
    return security.error();
  n.security = std::move(*security);
  n.traces = std::make_shared<trace_context>();
  n.traces->hub = n.trace_hub;
  n.traces->routes = n.routes;
  n.traces->node_id = n.cfg.node.id;
  n.traces->pool = n.pool.get();
  n.traces->lease_timeout = n.cfg.cluster.lease_timeout;
  n.traces->security = n.security;
  n.traces->link_max_bytes = link_max_bytes(n.cfg.limits);
  n.traces->traces_max = n.cfg.limits.traces_max;
  cluster_options co;
  co.cfg = n.cfg.cluster;
  co.node_id = n.cfg.node.id;
  co.shard_count = n.cfg.shard.count;
  co.routes = n.routes;
  co.security = n.security;
  co.link_max_bytes = link_max_bytes(n.cfg.limits);
  co.stats = n.stats;
  co.pause_timeout = n.cfg.api.request_timeout;
  // Wake notices heard on the manager's LISTEN connection (the hub: start_core_actors).
  co.on_wake = [weak = std::weak_ptr<wake_hub>(n.wakes)](const std::string& payload) {
    if (auto w = weak.lock())
      w->heard(payload);
  };
  // The supervisors of a lease the manager takes: one per kind registered (node/kinds.cpp).
  register_kinds(n);
  // A manager per shard group, on the group's database (ADR 0023); the node's parts talk to
  // them as one.
  std::vector<manager_actor> managers;
  for (auto& part : n.groups) {
    auto& g = *part;
    auto gco = co;
    gco.group = g.group.id;
    if (n.multi_group()) {
      gco.group_name = g.group.name;
      gco.shards = g.shards;
    }
    gco.pool = g.pool;
    gco.catalog = g.pool == n.pool.get() ? nullptr : n.pool.get();
    gco.dsn = g.dsn;
    gco.db = g.db;
    if (g.group.id == 0)
      gco.on_look = [&n] { follow_map(n); };
    g.manager = spawn_cluster_manager(*n.sys, std::move(gco));
    managers.push_back(g.manager);
  }
  n.manager = spawn_group_managers(*n.sys, std::move(managers));
  // Stops the shards they still run (none after a complete hand-off) and the peer links.
  n.stops.push("cluster manager", [&n] {
    // Every handle released: the actor system's stop waits for a detached actor until then.
    std::vector<manager_actor> all;
    for (auto& part : n.groups) {
      auto m = std::exchange(part->manager, manager_actor{});
      if (m != n.manager)
        all.push_back(std::move(m));
    }
    n.stop_actor(n.manager);
    n.stop_actors(all);
  });
  return {};
}

caf::error start_node_link(node_context& n) {
  auto& listen = n.cfg.caf.listen;
  n.link_service = make_node_service(*n.hub, n.routes, n.cfg.api.request_timeout, n.traces);
  grpc::ServerBuilder lb;
  lb.AddListeningPort(listen.to_string(), n.security.server_credentials(), &n.link_port);
  lb.RegisterService(n.link_service.get());
  lb.SetMaxReceiveMessageSize(link_max_bytes(n.cfg.limits));
  n.link_server = lb.BuildAndStart();
  if (!n.link_server || n.link_port == 0) {
    n.link_server.reset();
    n.link_service.reset();
    return make_error(errc::invalid_argument,
                      "cannot listen on caf.listen=" + listen.to_string()
                        + " (in use, or not an address of this host); choose another `caf.listen`");
  }
  // Other nodes stopped forwarding here once the hand-off was done; what is in flight
  // finishes until the deadline.
  n.stops.push("node link server", [&n] {
    n.traces->stop();
    n.link_server->Shutdown(n.stop_deadline);
    n.link_server->Wait();
    n.link_server.reset();
    n.link_service.reset();
  });
  lg->info("node link listening port={} tls={}", n.link_port,
           n.security.enabled ? "mutual" : "off (plaintext: loopback or a private network only)");
  return {};
}

caf::error join_cluster(node_context& n) {
  auto& cfg = n.cfg;
  persistence::node_row me;
  me.node_id = cfg.node.id;
  me.caf_host =
    cfg.cluster.advertise_host.empty() ? cfg.caf.listen.host : cfg.cluster.advertise_host;
  if (me.caf_host == "0.0.0.0" || me.caf_host.empty())
    me.caf_host = "127.0.0.1";
  // A proxy or a NAT between the nodes forwards another port to the listener.
  me.caf_port = cfg.cluster.advertise_port != 0 ? cfg.cluster.advertise_port : n.link_port;
  me.grpc_addr = cfg.grpc.listen.host + ":" + std::to_string(n.grpc_port);
  me.http_addr = cfg.http.listen.host + ":" + std::to_string(n.http_port);
  n.advertised_host = me.caf_host;
  // In every shard group's database: each group is a small cluster of its own (ADR 0023).
  for (auto& part : n.groups)
    if (auto err = persistence::register_node(*part->pool, me))
      return err;
  caf::error failed;
  caf::scoped_actor self{*n.sys};
  self->request(n.manager, cfg.api.request_timeout, join_atom_v)
    .receive([](ok_atom) {}, [&](caf::error& err) { failed = std::move(err); });
  if (failed)
    return failed;
  n.stops.push("shard hand-off", [&n] { hand_off(n); });
  return {};
}

} // namespace gost::runtime
