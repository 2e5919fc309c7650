#pragma once
// The kinds of entity a node hosts on its shards (offers, durable entities, and any other), as
// the runtime sees them: each kind registers what the router, the cluster manager, the node
// link and the node's start need of it, and they iterate the table instead of naming kinds.
//
//   kind_slot<echo_ops, echo_ops> echo = routes->kinds().add(make_shard_kind<echo_ops>(
//     "echo", [](const shard_lease& l) { return spawn_echo_shard(*l.sys, l.shard); },
//     [](const std::string& id) { return id.rfind("echo:", 0) == 0; }));
//   ask_kind(self, *routes, echo, deadline, ok, fail, echo_atom_v, id, text);
//
// Who registers: the node's start (node/kinds.cpp: offers, then durable entities), before the
// cluster manager starts any shard; the table is read-only afterwards. A kind is *forwarded*
// when the node link carries its operations (cluster/link_table.hpp maps them to protobuf):
// a request for a shard another node owns then goes there. A kind that is not forwarded is
// served by the nodes owning its shards only: a request for a shard of another node fails
// with errc::moved naming the kind (after the call's deadline, like a shard without owner).

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <caf/actor.hpp>
#include <caf/detail/type_list.hpp>
#include <caf/fwd.hpp>
#include <caf/message.hpp>
#include <caf/replies_to.hpp>

namespace gost::persistence {
class pg_pool;
}

namespace gost::runtime {

/// A lease this node just took: where a kind starts its supervisor of the shard.
struct shard_lease {
  caf::actor_system* sys = nullptr;
  uint32_t shard = 0;
  int64_t epoch = 0;                             ///< the lease's epoch (fences the shard's writes)
  const std::set<std::string>* paused = nullptr; ///< the stages paused now (never null)
  /// The shard group holding the shard (ADR 0023) and its database's pool, where the lease and
  /// the shard's rows are: a kind writes the shard's rows there, fenced by `epoch`.
  uint32_t group = 0;
  persistence::pg_pool* pool = nullptr;
};

/// One kind of entity hosted on shards.
struct shard_kind {
  std::string name; ///< for logs and errors (`offers`, `entities`, ...)
  /// Starts the kind's supervisor of a shard this node took (on the cluster manager's
  /// thread); an invalid handle when this node hosts none of the kind.
  std::function<caf::actor(const shard_lease&)> spawn;
  /// Whether the entity named `id` is one of this kind's (offer ids, `kind/id` keys, ...):
  /// requests that two kinds both answer (the kit's inspection) go to the kind owning the id.
  std::function<bool(const std::string& id)> owns;
  /// Whether a request (its arguments) is one of the kind's operations (make_shard_kind
  /// builds it from the kind's interface).
  std::function<bool(const caf::message&)> accepts;
  /// The node link carries its operations (cluster/link_table.hpp).
  bool forwarded = false;
  /// Its supervisors take the stages' pauses ((pause_atom, std::set<std::string>) → ok_atom).
  bool pausable = false;
};

/// A kind's place in the table, typed by what routes to it: `Ops`, the interface callers send
/// (to the local supervisor or a node link), and `Local`, the local supervisor's handle.
template <class Ops, class Local = Ops>
struct kind_slot {
  size_t index = 0;
  bool forwarded = false;
};

namespace detail {

template <class Sig>
struct accepts_sig;

template <class... Ins, class Outs>
struct accepts_sig<caf::typed_mpi<caf::detail::type_list<Ins...>, Outs>> {
  static bool test(const caf::message& m) { return m.match_elements<Ins...>(); }
};

template <class Sigs>
struct accepts_any;

template <class... Sigs>
struct accepts_any<caf::detail::type_list<Sigs...>> {
  static bool test(const caf::message& m) { return (accepts_sig<Sigs>::test(m) || ...); }
};

} // namespace detail

/// A kind answering the interface `Ops` (a caf::typed_actor): `accepts` is built from its
/// signatures.
template <class Ops>
shard_kind make_shard_kind(std::string name, std::function<caf::actor(const shard_lease&)> spawn,
                           std::function<bool(const std::string&)> owns) {
  shard_kind k;
  k.name = std::move(name);
  k.spawn = std::move(spawn);
  k.owns = std::move(owns);
  k.accepts = [](const caf::message& m) {
    return detail::accepts_any<typename Ops::signatures>::test(m);
  };
  return k;
}

/// The kinds of a node, in the order they registered (a kind's index is its slot).
class kind_table {
public:
  template <class Ops, class Local = Ops>
  kind_slot<Ops, Local> add(shard_kind k) {
    kind_slot<Ops, Local> slot{kinds_.size(), k.forwarded};
    kinds_.push_back(std::move(k));
    return slot;
  }

  const std::vector<shard_kind>& all() const noexcept { return kinds_; }
  size_t size() const noexcept { return kinds_.size(); }
  const shard_kind& operator[](size_t i) const { return kinds_[i]; }

private:
  std::vector<shard_kind> kinds_;
};

/// The supervisors this node runs for one shard it owns, one per kind (by slot; an invalid
/// handle for a kind this node hosts none of).
struct local_shard {
  std::vector<caf::actor> by_kind;

  caf::actor get(size_t kind) const { return kind < by_kind.size() ? by_kind[kind] : caf::actor{}; }
  /// Whether the node runs any supervisor of the shard.
  bool any() const {
    for (auto& a : by_kind)
      if (a)
        return true;
    return false;
  }
};

/// Starts every kind's supervisor of a shard this node took.
inline local_shard spawn_local_shard(const kind_table& kinds, const shard_lease& lease) {
  local_shard out;
  out.by_kind.reserve(kinds.size());
  for (auto& k : kinds.all())
    out.by_kind.push_back(k.spawn ? k.spawn(lease) : caf::actor{});
  return out;
}

} // namespace gost::runtime
