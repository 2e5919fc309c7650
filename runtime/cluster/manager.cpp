#include "cluster/manager.hpp"

#include <algorithm>
#include <map>
#include <set>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "cluster/ask_owner.hpp"
#include "cluster/lease_planner.hpp"
#include "cluster/router.hpp"
#include "gost/core/dependency.hpp"
#include "gost/core/log.hpp"
#include "gost/core/shard_hash.hpp"
#include "gost/core/stats.hpp"
#include "gost/persistence/cluster/leases.hpp"
#include "gost/persistence/cluster/pauses.hpp"
#include "gost/persistence/dedicated_pool.hpp"

CAF_ADD_ATOM(gost_runtime, gost::runtime, notified_atom, "notified")
CAF_ADD_ATOM(gost_runtime, gost::runtime, set_shards_atom, "setshards")

namespace gost::runtime {

namespace {

const auto lg = gost::log::get("cluster");

using persistence::held_lease;

/// What the manager handles: its interface, its heartbeat, the LISTEN connection's notice of a
/// membership change, and its group's new shards after a range moved.
using manager_impl = manager_actor::extend<caf::reacts_to<tick_atom>, caf::reacts_to<notified_atom>,
                                           caf::reacts_to<set_shards_atom, std::vector<uint32_t>>>;

} // namespace

namespace {

struct held_shard {
  int64_t epoch = 0;
  local_shard handles; ///< the supervisors of the shard, one per kind hosted (cluster/kinds.hpp)
  bool draining = false;

  /// Each supervisor of the shard.
  std::vector<caf::actor> actors() const {
    std::vector<caf::actor> out;
    for (auto& a : handles.by_kind)
      if (a)
        out.push_back(a);
    return out;
  }
  bool holds(const caf::actor_addr& a) const {
    return std::any_of(handles.by_kind.begin(), handles.by_kind.end(),
                       [&](const caf::actor& h) { return h && h.address() == a; });
  }
  /// The supervisors that take the stages' pauses.
  std::vector<caf::actor> pausable(const kind_table& kinds) const {
    std::vector<caf::actor> out;
    for (size_t k = 0; k < kinds.size(); ++k)
      if (kinds[k].pausable && handles.get(k))
        out.push_back(handles.get(k));
    return out;
  }
};

struct manager_state {
  static inline const char* name = "gost.cluster";
  cluster_options opts;
  /// The manager's own connection (cluster_options::pool): its heartbeat never waits for one
  /// of the node's pool, which the writers and stores keep busy under load.
  std::unique_ptr<persistence::pg_pool> own_pool;
  /// By shard: whether the group served here holds it (cluster_options::shards). The group's
  /// database may keep lease rows of shards another group serves now: those are not looked at.
  std::vector<bool> ours;
  uint32_t group_size = 0;
  /// How logs and the confirmation's lines name this manager: the node, and its group when
  /// the installation has several.
  std::string who;
  std::map<uint32_t, held_shard> held;
  /// The link to each other node (forwarding its shards' requests there).
  struct peer {
    std::string host;
    int port = 0;
    peer_link_ops link;
  };
  std::map<std::string, peer> peers;
  bool joined = false;
  /// Handing every shard off and taking none: the node stops (leave_atom) or an operator
  /// drained it (drain_node_atom).
  bool leaving = false;
  bool stopping = false; ///< leave_atom: the process stops; an undrain is refused
  /// Answered once the last shard is released: (leave_atom) with ok_atom, (drain_node_atom)
  /// with the number of shards handed off.
  std::vector<caf::typed_response_promise<ok_atom>> leaves;
  std::vector<caf::typed_response_promise<uint32_t>> drains;
  uint32_t handed_off = 0; ///< shards released since the drain began
  /// The shards released since the drain began: a drain is answered once other nodes own
  /// them all (a shard owned by nobody is a window of failed calls), or at `taken_by`.
  std::set<uint32_t> released;
  std::chrono::steady_clock::time_point taken_by{};
  std::unique_ptr<persistence::cluster_listener> listener;
  std::chrono::steady_clock::time_point last_tick{};
  bool notified_pending = false; ///< a notified round is scheduled
  /// Stages paused by operators (table stage_pauses) as last read: every shard held here has
  /// been told, and new ones start with it.
  std::set<std::string> paused;

  ~manager_state() {
    // The node is stopping: the shards still here stop with their manager.
    for (auto& [shard, h] : held)
      for (auto& a : h.actors())
        caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    for (auto& [node, p] : peers)
      caf::anon_send_exit(p.link, caf::exit_reason::user_shutdown);
  }
};

using self_ptr = manager_impl::stateful_pointer<manager_state>;

/// The leases of the group served here, out of all the rows its database holds.
caf::expected<std::vector<persistence::lease_row>> group_leases(manager_state& st) {
  auto leases = persistence::list_leases(*st.own_pool, st.opts.cfg.lease_timeout);
  if (leases)
    leases->erase(std::remove_if(leases->begin(), leases->end(),
                                 [&](const persistence::lease_row& l) {
                                   return l.shard >= st.ours.size() || !st.ours[l.shard];
                                 }),
                  leases->end());
  return leases;
}

std::string err_text(const caf::error& e) {
  return persistence::error_message(e);
}

/// Stops a shard actor this node must no longer run and forgets it.
void drop(self_ptr self, uint32_t shard, const char* why) {
  auto& st = self->state;
  auto i = st.held.find(shard);
  if (i == st.held.end())
    return;
  lg->warn("shard stopped shard={} epoch={} reason={}", shard, i->second.epoch, why);
  for (auto& a : i->second.actors()) {
    self->demonitor(a);
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }
  // Only while the route is still this shard's: after a move, another group's manager may
  // own the shard here already.
  st.opts.routes->clear_if(shard, i->second.handles);
  st.held.erase(i);
}

/// Answers who waits for the hand-off of every shard (leave_atom, drain_node_atom).
void answer_left(manager_state& st) {
  for (auto& rp : st.leaves)
    if (rp.pending())
      rp.deliver(ok_atom_v);
  for (auto& rp : st.drains)
    if (rp.pending())
      rp.deliver(st.handed_off);
  st.leaves.clear();
  st.drains.clear();
  st.released.clear();
}

/// While an operator's drain waits for its shards to be taken: answers it once every shard
/// released is owned by another node (or at `taken_by`, saying which are not). Called after
/// each look at the cluster (heartbeat, notices: the taker notifies when it acquires).
void check_taken(self_ptr self) {
  auto& st = self->state;
  if (st.drains.empty() || !st.held.empty()
      || st.taken_by == std::chrono::steady_clock::time_point{})
    return;
  auto leases = group_leases(st);
  if (!leases)
    return; // looked at again at the next heartbeat
  std::vector<uint32_t> untaken;
  for (auto& l : *leases)
    if (st.released.count(l.shard) != 0 && (l.free || l.owner == st.opts.node_id))
      untaken.push_back(l.shard);
  auto late = std::chrono::steady_clock::now() >= st.taken_by;
  if (!untaken.empty() && !late) {
    if (!st.notified_pending) { // look again soon, whether or not the taker's notice comes
      st.notified_pending = true;
      self->delayed_send(self, std::chrono::milliseconds{100}, notified_atom_v);
    }
    return;
  }
  if (untaken.empty())
    lg->info("drained shards taken by other nodes node={} count={}", st.opts.node_id,
             st.released.size());
  else
    lg->warn("drain answered with shards not yet taken by another node node={} untaken={} "
             "waited_ms={}",
             st.opts.node_id, untaken.size(), st.opts.cfg.lease_timeout.count());
  st.taken_by = {};
  answer_left(st);
}

void drain(self_ptr self, uint32_t shard);

/// Starts handing every shard held here off (the node is marked leaving first, so nobody
/// hands it new shards); who waits in `leaves` and `drains` is answered once the last one is
/// released.
void hand_off_all(self_ptr self) {
  auto& st = self->state;
  if (!st.leaving) {
    st.leaving = true;
    st.handed_off = 0;
    if (auto err = persistence::set_leaving(*st.own_pool, st.opts.node_id, true))
      lg->warn("cannot mark the node leaving error={}", err_text(err));
  }
  if (st.held.empty()) {
    answer_left(st);
    return;
  }
  lg->info("handing off shards node={} count={}", st.opts.node_id, st.held.size());
  std::vector<uint32_t> shards;
  for (auto& [shard, h] : st.held)
    shards.push_back(shard);
  for (auto s : shards)
    drain(self, s);
}

/// Releases the lease of `shard` held at `epoch`, and forgets its entry. Nothing when the
/// shard is held at another epoch now: a drain's late answers belong to a lease that was
/// dropped (taken over) since, and the shard was taken again with new supervisors, which must
/// neither lose their lease nor be forgotten while they run (the node's stop would wait on
/// them forever).
void release(self_ptr self, uint32_t shard, int64_t epoch) {
  auto& st = self->state;
  auto i = st.held.find(shard);
  if (i == st.held.end() || i->second.epoch != epoch)
    return;
  if (auto err =
        persistence::release_lease(*st.own_pool, st.opts.node_id, {shard, i->second.epoch}))
    lg->warn("lease release failed shard={} error={}; it expires instead", shard, err_text(err));
  else
    lg->info("lease released shard={} epoch={}", shard, i->second.epoch);
  st.opts.routes->clear_if(shard, i->second.handles);
  st.held.erase(i);
  if (!st.leaving)
    return;
  ++st.handed_off;
  st.released.insert(shard);
  if (st.held.empty() && !(st.leaves.empty() && st.drains.empty())) {
    lg->info("all shards handed off node={} count={}", st.opts.node_id, st.handed_off);
    // A stopping node answers now (it is going anyway); an operator's drain once the shards
    // are owned elsewhere, so that `gostctl drain` returning means they serve again.
    for (auto& rp : st.leaves)
      if (rp.pending())
        rp.deliver(ok_atom_v);
    st.leaves.clear();
    st.taken_by = std::chrono::steady_clock::now() + st.opts.cfg.lease_timeout;
    check_taken(self);
  }
}

/// Graceful hand-off: the shard takes no new work, finishes and commits what it has, stops;
/// then the lease is released. A drain that takes too long is cut by the shard itself at
/// `cluster.drain_timeout` (the actors still running killed, logged and counted); a shard
/// that does not answer even then is killed here a little later. Either way the lease is
/// released, and fencing rejects anything the old shard might still try to commit.
void drain(self_ptr self, uint32_t shard) {
  auto& st = self->state;
  auto& h = st.held.at(shard);
  if (h.draining)
    return;
  h.draining = true;
  lg->info("shard hand-off started shard={} epoch={}", shard, h.epoch);
  // Every supervisor of the shard drains; the lease goes when the last one is done (that
  // lease: the shard may be dropped and taken again meanwhile).
  auto epoch = h.epoch;
  auto actors = h.actors();
  auto left = std::make_shared<size_t>(actors.size());
  for (auto& a : actors)
    self
      ->request(caf::actor_cast<caf::typed_actor<caf::replies_to<drain_atom>::with<ok_atom>>>(a),
                st.opts.cfg.drain_timeout + std::chrono::seconds{5}, drain_atom_v)
      .then(
        [=](ok_atom) {
          if (--*left == 0)
            release(self, shard, epoch);
        },
        [=](caf::error& err) {
          lg->warn("shard drain failed shard={} error={}; releasing anyway", shard, err_text(err));
          caf::anon_send_exit(a, caf::exit_reason::kill);
          if (--*left == 0)
            release(self, shard, epoch);
        });
}

peer_link_ops link_to(self_ptr self, const persistence::node_row& n) {
  auto& st = self->state;
  auto& g = st.peers[n.node_id];
  if (g.link && g.host == n.caf_host && g.port == n.caf_port)
    return g.link;
  if (g.link) // the node restarted elsewhere: a new link
    caf::anon_send_exit(g.link, caf::exit_reason::user_shutdown);
  // A link connects lazily (gRPC): an unreachable node shows up as failed forwards, which
  // callers re-route after the lease moved.
  auto address = n.caf_host + ":" + std::to_string(n.caf_port);
  g = {n.caf_host, n.caf_port,
       spawn_peer_link(self->system(), address, st.opts.security, remote_attempt,
                       st.opts.link_max_bytes)};
  lg->info("node link node={} address={} tls={}", n.node_id, address, st.opts.security.enabled);
  return g.link;
}

void refresh_routes(self_ptr self, const std::vector<persistence::node_row>& nodes,
                    const std::vector<persistence::lease_row>& leases) {
  auto& st = self->state;
  std::map<std::string, const persistence::node_row*> by_id;
  for (auto& n : nodes)
    by_id[n.node_id] = &n;
  for (auto& l : leases) {
    // The router's group is the truth while a move switches the map: this manager may not
    // have been told yet that a shard is another group's now.
    if (l.shard >= st.ours.size() || !st.ours[l.shard]
        || st.opts.routes->group_of(l.shard) != st.opts.group)
      continue;
    if (auto h = st.held.find(l.shard); h != st.held.end()) {
      // Local (set when acquired); set again should anything have cleared it since.
      if (!st.opts.routes->here(l.shard))
        st.opts.routes->set_local(l.shard, h->second.handles);
      continue;
    }
    auto n = by_id.find(l.owner);
    if (l.free || l.owner == st.opts.node_id || n == by_id.end()) {
      st.opts.routes->clear(l.shard);
      continue;
    }
    if (auto link = link_to(self, *n->second))
      st.opts.routes->set_remote(l.shard, caf::actor_cast<caf::actor>(link));
    else
      st.opts.routes->clear(l.shard);
  }
}

void rebalance(self_ptr self, const std::vector<persistence::node_row>& nodes,
               const std::vector<persistence::lease_row>& leases) {
  auto& st = self->state;
  lease_planner plan{st.opts.node_id, st.group_size, st.opts.cfg.max_moves};
  std::vector<std::string> alive;
  for (auto& n : nodes)
    if (n.alive)
      alive.push_back(n.node_id);
  std::vector<lease_planner::lease> all;
  for (auto& l : leases)
    all.push_back({l.shard, l.owner, l.free});
  std::vector<lease_planner::held> mine;
  for (auto& [shard, h] : st.held)
    mine.push_back({shard, h.draining});
  plan.observe(alive, all, mine);
  // Take free leases up to an even share (free: nobody's, or its owner stopped heartbeating).
  // (A group holding no shard takes none: its share is 0.)
  while (st.group_size > 0 && plan.wants_more()) {
    auto got =
      persistence::acquire_free_lease(*st.own_pool, st.opts.node_id, st.opts.cfg.lease_timeout,
                                      st.opts.shards.value_or(std::vector<uint32_t>{}));
    if (!got) {
      if (!db_outage_reported(st.opts.db.get(), got.error()))
        lg->warn("lease acquisition failed error={}", err_text(got.error()));
      break;
    }
    for (auto& e : got->ended)
      lg->warn("ended a frozen transaction of an expired lease owner owner={} pid={}; its "
               "shard is taken next round",
               e.owner, e.pid);
    if (!got->lease)
      break;
    auto [shard, epoch] = *got->lease;
    // A lease of its own can be free too (its heartbeat late, or this node's liveness session
    // lost meanwhile) and taken again at a new epoch: the shard it still runs at the old one
    // stops first. Replaced without a stop, it would run on unseen (polling until the process
    // is killed: the actor system's stop waits for it) beside the new one.
    if (st.held.count(shard) != 0)
      drop(self, shard, "lease taken again at a new epoch (it had expired)");
    auto handles = spawn_local_shard(
      st.opts.routes->kinds(),
      shard_lease{&self->system(), shard, epoch, &st.paused, st.opts.group, st.opts.pool});
    held_shard h{epoch, handles, false};
    for (auto& a : h.actors())
      self->monitor(a);
    st.held[shard] = h;
    st.opts.routes->set_local(shard, handles);
    lg->info("lease acquired shard={} epoch={}", shard, epoch);
    plan.acquired();
  }
  // Hand shards to nodes below their share, a few at a time.
  while (auto move = plan.next_handoff()) {
    auto [shard, to] = *move;
    persistence::mark_handoff(*st.own_pool, st.opts.node_id, {shard, st.held.at(shard).epoch}, to);
    drain(self, shard);
  }
}

/// A restarted node: leases this node id owns but this incarnation does not hold are its
/// previous incarnation's. Holding the node's liveness lock proves that one gone, so they are
/// freed for this node now instead of after the lease timeout. True when any was freed.
bool take_back_previous(self_ptr self, const std::vector<persistence::lease_row>& leases) {
  auto& st = self->state;
  if (st.leaving || !st.listener || !st.listener->holds_liveness_lock())
    return false;
  bool stale = std::any_of(leases.begin(), leases.end(), [&](const persistence::lease_row& l) {
    return l.owner == st.opts.node_id && st.held.count(l.shard) == 0;
  });
  if (!stale)
    return false;
  std::vector<uint32_t> held;
  for (auto& [shard, h] : st.held)
    held.push_back(shard);
  auto freed = persistence::free_previous_leases(*st.own_pool, st.opts.node_id, held);
  if (!freed) {
    lg->warn("cannot take back the previous incarnation's leases error={}; they expire "
             "instead",
             err_text(freed.error()));
    return false;
  }
  if (*freed > 0)
    lg->info("previous incarnation gone (liveness lock held): its leases taken back count={}",
             *freed);
  return *freed > 0;
}

/// Reads the paused stages; when the set changed, tells every shard held here and marks the
/// stages' figures. Returns an error when the table could not be read (the last set stays).
caf::error read_pauses(self_ptr self) {
  auto& st = self->state;
  // Cluster-wide: in the catalog database, whichever group this manager serves.
  auto rows =
    persistence::list_stage_pauses(st.opts.catalog != nullptr ? *st.opts.catalog : *st.own_pool);
  if (!rows)
    return rows.error();
  std::set<std::string> now;
  for (auto& r : *rows)
    now.insert(r.stage_id);
  if (now == st.paused)
    return {};
  std::string names;
  for (auto& id : now)
    names += (names.empty() ? "" : ",") + id;
  lg->info("paused stages now [{}] node={}", names, st.opts.node_id);
  st.paused = std::move(now);
  if (st.opts.stats)
    for (auto& m : st.opts.stats->stages)
      m.paused.store(st.paused.count(m.id) != 0, std::memory_order_relaxed);
  for (auto& [shard, h] : st.held)
    for (auto& a : h.pausable(st.opts.routes->kinds()))
      self->request(a, caf::infinite, pause_atom_v, st.paused)
        .then([](ok_atom) {}, [](caf::error&) {});
  return {};
}

/// Answers `rp` once every shard held here confirmed the current pauses (no run of a paused
/// stage in flight), or with an error naming a shard that did not within `timeout`. A shard
/// that stopped meanwhile (handed off) runs nothing: it counts as confirmed.
void confirm_pauses(self_ptr self, caf::typed_response_promise<ok_atom> rp,
                    std::chrono::milliseconds timeout) {
  auto& st = self->state;
  std::vector<std::pair<uint32_t, caf::actor>> asked;
  for (auto& [shard, h] : st.held)
    for (auto& a : h.pausable(st.opts.routes->kinds()))
      asked.emplace_back(shard, a);
  if (asked.empty()) {
    rp.deliver(ok_atom_v);
    return;
  }
  struct pending_t {
    size_t left;
    bool failed = false;
  };
  auto pending = std::make_shared<pending_t>(pending_t{asked.size()});
  for (auto& [shard, a] : asked)
    self->request(a, timeout, pause_atom_v, st.paused)
      .then(
        [=](ok_atom) mutable {
          if (--pending->left == 0 && !pending->failed)
            rp.deliver(ok_atom_v);
        },
        [=, shard = shard](caf::error& err) mutable {
          if (pending->failed)
            return;
          if (err == caf::sec::request_timeout) {
            pending->failed = true;
            rp.deliver(make_error(errc::unavailable,
                                  "shard " + std::to_string(shard) + " still runs the stage after "
                                    + std::to_string(timeout.count()) + " ms; ask again"));
            return;
          }
          if (--pending->left == 0)
            rp.deliver(ok_atom_v);
        });
}

void tick(self_ptr self) {
  auto& st = self->state;
  if (st.opts.on_look)
    st.opts.on_look();
  std::vector<held_lease> held;
  for (auto& [shard, h] : st.held)
    held.push_back({shard, h.epoch});
  // The leases are confirmed from this heartbeat's start (router.hpp: the shards are served
  // only while they are), provided the liveness session is not lost meanwhile.
  auto& confirmation = st.opts.routes->confirmation(st.opts.group);
  auto generation = confirmation.generation();
  auto started = std::chrono::steady_clock::now();
  if (!confirmation.confirmed(started) && !held.empty() && confirmation.mark_unconfirmed())
    lg->warn("shard leases unconfirmed node={} shards={} since_ms={}; calls for its shards are "
             "refused (UNAVAILABLE) until a heartbeat renews them",
             st.who, held.size(),
             std::chrono::duration_cast<std::chrono::milliseconds>(
               started - confirmation.unconfirmed_since())
               .count());
  auto renewed = persistence::heartbeat(*st.own_pool, st.opts.node_id, held);
  if (!renewed) {
    if (!db_outage_reported(st.opts.db.get(), renewed.error()))
      lg->warn("heartbeat failed node={} error={}", st.opts.node_id, err_text(renewed.error()));
    return;
  }
  std::set<uint32_t> still;
  for (auto& l : *renewed)
    still.insert(l.shard);
  for (auto& l : held)
    if (still.count(l.shard) == 0)
      drop(self, l.shard,
           "lease taken over (by another node: this node missed its heartbeats; or fenced by a "
           "shard move)");
  auto now = std::chrono::steady_clock::now();
  auto was_down = confirmation.unconfirmed_since();
  if (confirmation.confirm(started, generation, now))
    lg->info("shard leases confirmed again node={} shards={} after_ms={}", st.who, still.size(),
             std::chrono::duration_cast<std::chrono::milliseconds>(now - was_down).count());
  else if (!confirmation.confirmed(now))
    // The heartbeat began too long ago to confirm anything (the process was paused, or the
    // session changed meanwhile): another one soon, rather than a whole interval later.
    self->send(self, notified_atom_v);
  // Before new leases: their shards start with the current pauses.
  if (auto err = read_pauses(self); err && !db_outage_reported(st.opts.db.get(), err))
    lg->warn("paused stages unavailable error={}; the last known ones stay", err_text(err));
  auto nodes = persistence::list_nodes(*st.own_pool, st.opts.cfg.lease_timeout);
  auto leases = group_leases(st);
  if (leases && take_back_previous(self, *leases))
    leases = group_leases(st);
  if (!nodes || !leases) {
    auto& err = nodes ? leases.error() : nodes.error();
    if (!db_outage_reported(st.opts.db.get(), err))
      lg->warn("cluster view unavailable error={}", err_text(err));
    return;
  }
  bool others_own = std::any_of(leases->begin(), leases->end(), [&](auto& l) {
    return !l.free && !l.owner.empty() && l.owner != st.opts.node_id;
  });
  // Alone (no other live node, no lease owned elsewhere): nobody can take the shards, so a
  // late heartbeat refuses no call (lease_confirmation::set_alone). Decided before the leases
  // this look takes start their shards: a lone node's first shards serve at once.
  confirmation.set_alone(!others_own && std::none_of(nodes->begin(), nodes->end(), [&](auto& n) {
    return n.alive && n.node_id != st.opts.node_id;
  }));
  // The listener's look for gone nodes (every ~200 ms) matters only while others own leases.
  if (st.listener)
    st.listener->watch_others(others_own);
  if (!st.leaving)
    rebalance(self, *nodes, *leases);
  refresh_routes(self, *nodes, *leases);
}

/// Which shards the group served here holds (cluster_options::shards).
void set_ours(manager_state& st) {
  st.ours.assign(st.opts.shard_count, !st.opts.shards);
  if (st.opts.shards)
    for (auto shard : *st.opts.shards)
      if (shard < st.ours.size())
        st.ours[shard] = true;
  st.group_size = static_cast<uint32_t>(std::count(st.ours.begin(), st.ours.end(), true));
}

manager_impl::behavior_type manager_fun(self_ptr self, cluster_options opts) {
  self->state.opts = std::move(opts);
  {
    auto& st = self->state;
    set_ours(st);
    st.who = st.opts.group_name.empty() ? st.opts.node_id
                                        : st.opts.node_id + " group=" + st.opts.group_name;
  }
  // One connection: the manager is one detached actor, one statement at a time.
  self->state.own_pool = persistence::dedicated_pool(*self->state.opts.pool, 1);
  // Connected now, while the node starts, not in the first heartbeat after it joins: that
  // heartbeat's round decides when the node's first shards serve.
  if (auto err = self->state.own_pool->ping())
    lg->warn("cluster manager's connection not open yet error={}; the first heartbeat opens it",
             err_text(err));
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& st = self->state;
    for (auto& [shard, h] : st.held)
      if (h.holds(dm.source)) {
        if (!h.draining) {
          // A supervisor that stopped on its own (its lease was fenced, or it failed): stop
          // the shard's others and give the lease up; the next heartbeat takes a lease again
          // and starts fresh supervisors.
          lg->warn("shard actor stopped shard={} reason={}", shard,
                   self->system().render(dm.reason));
          for (auto& a : h.actors())
            if (a.address() != dm.source) {
              self->demonitor(a);
              caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
            }
          release(self, shard, h.epoch);
        }
        return;
      }
  });
  return {
    [=](join_atom) {
      auto& st = self->state;
      if (st.joined || st.leaving)
        return ok_atom_v;
      st.joined = true;
      // From now on the shards are served only while their leases are confirmed, with a
      // margin of one heartbeat interval below the lease timeout (at most a quarter of it: a
      // heartbeat comes a little later than every interval, and must come in time).
      st.opts.routes->confirmation(st.opts.group)
        .enable(st.who, st.opts.cfg.lease_timeout,
                std::min(st.opts.cfg.heartbeat, st.opts.cfg.lease_timeout / 4),
                std::chrono::steady_clock::now());
      if (!st.opts.dsn.empty()) {
        caf::actor_addr me = self->address();
        std::weak_ptr<router> routes = st.opts.routes;
        auto node_id = st.who;
        auto group = st.opts.group;
        st.listener = std::make_unique<persistence::cluster_listener>(
          st.opts.dsn,
          [me, routes, group] {
            // A node joined, left or moved a lease: not alone any more, before the look.
            if (auto r = routes.lock())
              r->confirmation(group).set_alone(false);
            if (auto h = caf::actor_cast<manager_impl>(me))
              caf::anon_send(h, notified_atom_v);
          },
          st.opts.node_id, st.opts.on_wake,
          [me, routes, node_id, group](bool locked) {
            auto r = routes.lock();
            if (!r)
              return;
            if (locked) {
              // Heartbeats from now on confirm; look now (a restarted node takes its previous
              // incarnation's leases back). Not a change by another node: alone stays as it is.
              r->confirmation(group).session_locked();
              if (auto h = caf::actor_cast<manager_impl>(me))
                caf::anon_send(h, notified_atom_v);
              return;
            }
            // Other nodes take this node's leases from now on: refuse its shards' calls at once.
            if (r->confirmation(group).session_lost(std::chrono::steady_clock::now()))
              lg->warn("shard leases unconfirmed node={}: the liveness session to PostgreSQL is "
                       "lost (other nodes take the leases now); calls for its shards are refused "
                       "(UNAVAILABLE) until the lock is taken again and a heartbeat renews them",
                       node_id);
          });
      }
      self->send(self, tick_atom_v);
      return ok_atom_v;
    },
    [=](tick_atom) {
      self->state.last_tick = std::chrono::steady_clock::now();
      tick(self);
      check_taken(self);
      self->delayed_send(self, self->state.opts.cfg.heartbeat, tick_atom_v);
    },
    [=](notified_atom) {
      // Another node joined, is leaving or released a lease: look now rather than at the next
      // heartbeat (at most every 50 ms; a burst of notifications makes one extra round).
      auto& st = self->state;
      if (std::chrono::steady_clock::now() - st.last_tick < std::chrono::milliseconds{50}) {
        if (!st.notified_pending) {
          st.notified_pending = true;
          self->delayed_send(self, std::chrono::milliseconds{50}, notified_atom_v);
        }
        return;
      }
      st.notified_pending = false;
      lg->info("cluster change notified node={}; looking now", st.opts.node_id);
      st.last_tick = std::chrono::steady_clock::now();
      tick(self);
      check_taken(self);
    },
    [=](set_shards_atom, std::vector<uint32_t>& shards) {
      auto& st = self->state;
      std::vector<uint32_t> gone;
      std::set<uint32_t> now(shards.begin(), shards.end());
      for (auto& [shard, h] : st.held)
        if (now.count(shard) == 0)
          gone.push_back(shard);
      lg->info("shard group's shards changed node={} shards={} before={}", st.who, shards.size(),
               st.group_size);
      st.opts.shards = std::move(shards);
      set_ours(st);
      // Held here and moved away: the fence took the lease at the source already (a
      // heartbeat usually stopped the shard before the switch); the route may be the new
      // group's by now, and stays.
      for (auto shard : gone) {
        auto& h = st.held.at(shard);
        lg->warn("shard stopped shard={} epoch={} reason=its range moved to another group", shard,
                 h.epoch);
        for (auto& a : h.actors()) {
          self->demonitor(a);
          caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
        }
        st.opts.routes->clear_if(shard, h.handles);
        st.held.erase(shard);
      }
      if (st.joined && !st.leaving)
        self->send(self, notified_atom_v);
    },
    [=](pause_atom) -> caf::result<ok_atom> {
      // An operator paused or resumed a stage (admin service): read the table now, and answer
      // once this node's shards run none of the paused stages.
      if (auto err = read_pauses(self))
        return err;
      auto rp = self->make_response_promise<ok_atom>();
      confirm_pauses(self, rp, self->state.opts.pause_timeout);
      return rp;
    },
    [=](leave_atom) -> caf::result<ok_atom> {
      auto& st = self->state;
      st.stopping = true;
      auto rp = self->make_response_promise<ok_atom>();
      st.leaves.push_back(rp);
      hand_off_all(self);
      return rp;
    },
    [=](drain_node_atom) -> caf::result<uint32_t> {
      // An operator's drain: like a stop, but the node stays up (its API forwards to the new
      // owners). Somebody must take the shards: another node alive and not leaving.
      auto& st = self->state;
      if (st.stopping)
        return make_error(errc::failed_precondition, "the node is stopping; its shards are "
                                                     "being handed off already");
      if (!st.leaving) {
        auto nodes = persistence::list_nodes(*st.own_pool, st.opts.cfg.lease_timeout);
        if (!nodes)
          return nodes.error();
        auto others = std::count_if(nodes->begin(), nodes->end(), [&](auto& n) {
          return n.alive && n.node_id != st.opts.node_id;
        });
        if (others == 0)
          return make_error(errc::failed_precondition,
                            "no other node is alive to take the shards of node " + st.opts.node_id
                              + " (gostctl nodes); start one first");
        lg->info("node drain started node={} shards={}", st.opts.node_id, st.held.size());
      }
      auto rp = self->make_response_promise<uint32_t>();
      st.drains.push_back(rp);
      hand_off_all(self);
      return rp;
    },
    [=](undrain_atom) -> caf::result<bool> {
      auto& st = self->state;
      if (st.stopping)
        return make_error(errc::failed_precondition, "the node is stopping");
      if (!st.leaving)
        return false;
      if (auto err = persistence::set_leaving(*st.own_pool, st.opts.node_id, false))
        return err;
      st.leaving = false;
      // Who still waits for the drain: it ends here, with the shards handed off so far.
      answer_left(st);
      lg->info("node drain ended node={}; taking a share of the shards again", st.opts.node_id);
      self->send(self, tick_atom_v);
      return true;
    },
  };
}

} // namespace

void set_manager_shards(const manager_actor& manager, std::vector<uint32_t> shards) {
  caf::anon_send(caf::actor_cast<manager_impl>(manager), set_shards_atom_v, std::move(shards));
}

manager_actor spawn_cluster_manager(caf::actor_system& sys, cluster_options opts) {
  return sys.spawn<caf::detached>(manager_fun, std::move(opts));
}

namespace {

/// Asks every manager `xs...` and answers `rp` with the answers folded by `fold` once all came,
/// or with the first error.
template <class T, class Fold, class... Ts>
caf::result<T> ask_all(manager_actor::pointer self, const std::vector<manager_actor>& managers,
                       T init, Fold fold, Ts... xs) {
  struct pending_t {
    size_t left;
    T acc;
    bool done = false;
  };
  auto rp = self->make_response_promise<T>();
  auto pending = std::make_shared<pending_t>(pending_t{managers.size(), init});
  for (auto& m : managers)
    self->request(m, caf::infinite, xs...)
      .then(
        [=](T answer) mutable {
          if (pending->done)
            return;
          pending->acc = fold(pending->acc, answer);
          if (--pending->left == 0) {
            pending->done = true;
            rp.deliver(pending->acc);
          }
        },
        [=](caf::error& err) mutable {
          if (pending->done)
            return;
          pending->done = true;
          rp.deliver(std::move(err));
        });
  return rp;
}

manager_actor::behavior_type group_managers_fun(manager_actor::pointer self,
                                                std::vector<manager_actor> managers) {
  auto ok = [](ok_atom, ok_atom) { return ok_atom_v; };
  return {
    [=](join_atom a) { return ask_all(self, managers, ok_atom_v, ok, a); },
    [=](pause_atom a) { return ask_all(self, managers, ok_atom_v, ok, a); },
    [=](leave_atom a) { return ask_all(self, managers, ok_atom_v, ok, a); },
    [=](drain_node_atom a) {
      return ask_all(
        self, managers, uint32_t{0}, [](uint32_t x, uint32_t y) { return x + y; }, a);
    },
    [=](undrain_atom a) {
      return ask_all(
        self, managers, false, [](bool x, bool y) { return x || y; }, a);
    },
  };
}

} // namespace

manager_actor spawn_group_managers(caf::actor_system& sys, std::vector<manager_actor> managers) {
  if (managers.size() == 1)
    return managers.front();
  return sys.spawn(group_managers_fun, std::move(managers));
}

} // namespace gost::runtime
