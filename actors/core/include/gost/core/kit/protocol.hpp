#pragma once
// The entity kit's interfaces: what every entity actor and every shard answers besides its
// kind's own operations, and what a shard needs of its kind's store. Light on purpose (no
// actor implementation here): domain protocol headers include it.

#include <set>
#include <string>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "gost/core/kit/trail.hpp"
#include "gost/core/protocol.hpp"
#include "gost/persistence/queue.hpp"
#include "gost/persistence/writes.hpp"

namespace gost::kit {

// -- the kit's interfaces ---------------------------------------------------------------------

/// What every entity actor answers besides its kind's operations.
using entity_base = caf::typed_actor<
  // A due entry of a lane's queue: do the entity's work for that lane; the last argument is
  // how the entry reached the shard (an event_source, for the actor's trail). Replies the
  // queue entries the work committed (to be scheduled by the shard).
  caf::replies_to<run_atom, std::string, uint8_t>::with<persistence::queue_entries>,
  // An entry comes due soon: load now so the run starts on time.
  caf::reacts_to<warm_atom>,
  // Messages waiting in the actor's mailbox (answered between events).
  caf::replies_to<mailbox_atom>::with<uint64_t>,
  // Sent by its shard, which has forgotten the actor (idle, or over the resident cap): stop
  // after what is already in the mailbox.
  caf::reacts_to<passivate_atom, ok_atom>>;

template <class Ops>
using entity_actor = typename Ops::template extend_with<entity_base>;

/// What operators ask of the owner of an entity, wherever they call from (routers hold a kind's
/// operations plus this, and node links carry it):
using inspect_ops = caf::typed_actor<
  // Whether an actor holds it, the messages waiting in its mailbox (-1: not resident, or busy
  // in an event for over a second), what it waits on, its recent events (trail.hpp), the
  // shard's epoch and write lag.
  caf::replies_to<resident_atom, std::string>::with<activity>,
  // Passivates the entity's actor (as the idle sweep would); answers whether one was resident.
  caf::replies_to<passivate_atom, std::string>::with<bool>>;

/// What every shard answers besides its kind's operations and inspect_ops.
template <class Actor>
using shard_base = caf::typed_actor<
  // Queue entries committed outside a run (API changes, console verbs), with who queued them
  // (an event_source: the runs' source in the actors' trails).
  caf::reacts_to<enqueued_atom, persistence::queue_entries, uint8_t>,
  // An entity actor stopped (entity id, its CAF actor id): sent by the actor itself as its
  // state goes, instead of a CAF monitor (an attachable per actor).
  caf::reacts_to<stopped_atom, std::string, uint64_t>,
  // The entity's actor while it is resident, else an invalid handle (tests, diagnostics).
  caf::replies_to<get_atom, resident_atom, std::string>::with<Actor>,
  // Graceful hand-off: take no new work (new requests get errc::moved), let every entity actor
  // finish what it has (all of it committed), then answer and stop.
  caf::replies_to<drain_atom>::with<ok_atom>,
  // The lanes paused now (all of them: the set replaces the last one). Answers once no run of
  // a paused lane is in flight, so none runs after the answer; a lane no longer paused starts
  // its backlog at once.
  caf::replies_to<pause_atom, std::set<std::string>>::with<ok_atom>>;

/// A kind's shard: its operations, inspection, the kit's shard messages and `Extra` signatures
/// of the kind's own (e.g. the offers' background rescan).
template <class Ops, class Actor, class... Extra>
using shard_actor = typename Ops::template extend_with<inspect_ops>::template extend_with<
  shard_base<Actor>>::template extend<Extra...>;

/// The durable queue reads a shard needs: entries of `shard` due before a time (µs since the
/// epoch), earliest first, after a cursor entry (empty: from the start), at most a page; then,
/// as a hint, at most one more: the earliest entry due after that time (the shard polls again
/// in time for it, and does not queue it yet). A store may leave the hint out.
using queue_store =
  caf::typed_actor<caf::replies_to<due_atom, uint32_t, int64_t, uint32_t,
                                   persistence::queue_entries>::with<persistence::queue_entries>>;

/// A write-behind writer of write-sets of type `WriteSet` (kit/writer.hpp): (shard, lease epoch,
/// set) -> outcome, answered once the batch holding it committed (or with the batch's error:
/// nothing committed).
template <class WriteSet>
using writer_actor =
  caf::typed_actor<typename caf::replies_to<write_atom, uint32_t, int64_t,
                                            WriteSet>::template with<persistence::write_outcome>>;

/// The writer of `shard` among `writers` (shard mod n): a shard's writes stay in order.
template <class Writers>
const typename Writers::value_type& writer_for(const Writers& writers, uint32_t shard) {
  return writers[shard % writers.size()];
}

} // namespace gost::kit

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(gost::persistence::queue_entries)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(gost::kit::activity)
