#pragma once
// Every actor protocol of gost's core in one place: atoms, message types and the typed
// interfaces. A message type is announced once, in the type-ID block at the end, and
// `register_types(cfg)` registers the block with an actor system config.

#include <cstdint>
#include <string>

#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/replies_to.hpp>
#include <caf/type_id.hpp>
#include <caf/typed_actor.hpp>

#include <vector>

#include <caf/allowed_unsafe_message_type.hpp>

#include "gost/actors/proto_inspect.hpp"
#include "gost/persistence/write_behind.hpp"
#include "gost/v1/offer.pb.h"
#include "gost/v1/state_service.pb.h"

namespace gost {

// -- atoms (text at most 10 characters) -----------------------------------------------------

using create_atom = caf::atom_constant<caf::atom("create")>;
using load_atom = caf::atom_constant<caf::atom("load")>;
using passivate_atom = caf::atom_constant<caf::atom("passivate")>;
using find_atom = caf::atom_constant<caf::atom("find")>;
using write_atom = caf::atom_constant<caf::atom("write")>;
using run_atom = caf::atom_constant<caf::atom("run")>;
using enqueued_atom = caf::atom_constant<caf::atom("enqueued")>;
using due_atom = caf::atom_constant<caf::atom("due")>;
using count_atom = caf::atom_constant<caf::atom("count")>;
using resident_atom = caf::atom_constant<caf::atom("resident")>;
using scan_atom = caf::atom_constant<caf::atom("scan")>;
using list_atom = caf::atom_constant<caf::atom("list")>;
using warm_atom = caf::atom_constant<caf::atom("warm")>;
using mailbox_atom = caf::atom_constant<caf::atom("mailbox")>;
using drain_atom = caf::atom_constant<caf::atom("drain")>;
using state_atom = caf::atom_constant<caf::atom("state")>;
using stopped_atom = caf::atom_constant<caf::atom("stopped")>;
using caf::delete_atom;
using caf::get_atom;
using caf::ok_atom;
using caf::update_atom;

// -- message types ----------------------------------------------------------------------------

using offer_msg = pb<v1::Offer>;
using state_read_msg = pb<v1::ReadStateResponse>;
using state_update_msg = pb<v1::UpdateStateResponse>;

/// Everything an offer actor loads when it activates. Process-local (never sent to another
/// node), like the write-behind types below.
struct offer_snapshot {
  bool found = false;
  v1::Offer offer;
  std::vector<persistence::stored_state> states;
  std::vector<persistence::queue_entry> queued;
};

using queue_entries = std::vector<persistence::queue_entry>;
using stage_count_list = std::vector<persistence::stage_counts>;
using offer_snapshots = std::vector<offer_snapshot>;
using offer_list = std::vector<v1::Offer>;

/// "No version expected": an update or delete that applies whatever the current version.
constexpr int64_t any_version = -1;

// -- interfaces -------------------------------------------------------------------------------

/// Blocking reads of stored offers and queues; runs on its own thread (spawned detached). All
/// writes go through the shard's writer_actor.
/// Errors: db_errc values (see gost/persistence/errors.hpp).
using store_actor = caf::typed_actor<
  // The stored offer with its states and queue entries (found = false when there is none).
  caf::replies_to<load_atom, std::string>::with<offer_snapshot>,
  // Queue entries of a shard due before a time (µs since the epoch), earliest first, after a
  // cursor entry (an empty stage id: from the start), at most a page.
  caf::replies_to<due_atom, uint32_t, int64_t, uint32_t, queue_entries>::with<queue_entries>,
  // A rescan page: the next offers of a shard after an id, with states and queue entries.
  caf::replies_to<scan_atom, uint32_t, std::string, uint32_t>::with<offer_snapshots>,
  // Queue and dead-letter counts per stage at a time (µs since the epoch).
  caf::replies_to<count_atom, int64_t>::with<stage_count_list>,
  // The id of the offer under the seller's key (seller_id, namespace, external_id), or
  // db_errc::not_found.
  caf::replies_to<find_atom, std::string, std::string, std::string>::with<std::string>,
  // A page of a seller's offers: (seller, filter by namespace?, namespace, after id, limit).
  caf::replies_to<list_atom, std::string, bool, std::string, std::string, uint32_t>::with<offer_list>>;

/// The write-behind writer of one shard (detached): group-commits write-sets and answers each
/// with its outcome once the batch committed.
using writer_actor = caf::typed_actor<
  caf::replies_to<write_atom, persistence::write_set>::with<persistence::write_outcome>>;

/// The operations on one offer. Shards route them to offer actors, which serialize them.
using offer_ops = caf::typed_actor<
  // Creates the offer; id, version and timestamps are set by the actor. Replies the stored offer.
  caf::replies_to<create_atom, offer_msg>::with<offer_msg>,
  caf::replies_to<get_atom, std::string>::with<offer_msg>,
  // New content; the int64 is the expected current version or any_version; the string is a
  // field mask (comma-separated top-level Offer fields to take from the new content; empty:
  // all of them).
  caf::replies_to<update_atom, offer_msg, int64_t, std::string>::with<offer_msg>,
  // Replies the version of the deletion.
  caf::replies_to<delete_atom, std::string, int64_t>::with<int64_t>,
  // A stage's state of the offer: (offer id, stage id).
  caf::replies_to<get_atom, state_atom, std::string, std::string>::with<state_read_msg>,
  // Compare-and-set of a stage's state: (offer id, stage id, serialized google.protobuf.Any,
  // expected state version). A stale version answers updated = false, not an error.
  caf::replies_to<update_atom, state_atom, std::string, std::string, std::string,
                  int64_t>::with<state_update_msg>>;

/// One actor per resident offer.
using offer_actor = offer_ops::extend<
  // A due entry of a stage's queue: run the stage. Replies the queue entries the run
  // committed (to be scheduled by the shard).
  caf::replies_to<run_atom, std::string>::with<queue_entries>,
  // A stage entry comes due soon: load the offer now so the run starts on time.
  caf::reacts_to<warm_atom>,
  // Messages waiting in the actor's mailbox (answered between events).
  caf::replies_to<mailbox_atom>::with<uint64_t>,
  // Sent by its shard, which has forgotten the actor (idle, or over the resident cap): stop
  // after what is already in the mailbox.
  caf::reacts_to<passivate_atom, ok_atom>>;

/// One supervisor per shard: spawns offer actors on demand and forwards to them.
using shard_actor = offer_ops::extend<
  // Queue entries an offer actor committed outside a stage run (API changes).
  caf::reacts_to<enqueued_atom, queue_entries>,
  // An offer actor stopped (offer id, its CAF actor id): sent by the actor itself as its
  // state goes, instead of a CAF monitor (an attachable per actor).
  caf::reacts_to<stopped_atom, std::string, uint64_t>,
  // Whether an offer actor for this offer is in memory.
  caf::replies_to<resident_atom, std::string>::with<bool>,
  // The mailbox size of the offer's actor (db_errc::not_found when not resident).
  caf::replies_to<mailbox_atom, std::string>::with<uint64_t>,
  // Graceful hand-off: take no new work (new requests get db_errc::moved), let every offer
  // actor finish what it has (all of it committed), then answer and stop.
  caf::replies_to<drain_atom>::with<ok_atom>>;

/// Registers gost's message types with an actor system config (call once per config).
void register_types(caf::actor_system_config& cfg);

} // namespace gost

// Process-local message types: never serialized.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(gost::offer_snapshot)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(gost::queue_entries)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(gost::stage_count_list)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(gost::offer_snapshots)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(gost::offer_list)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(gost::persistence::write_set)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(gost::persistence::write_outcome)

CAF_BEGIN_TYPE_ID_BLOCK(gost, caf::first_custom_type_id)
  CAF_ADD_TYPE_ID(gost, (gost::offer_msg))
  CAF_ADD_TYPE_ID(gost, (gost::state_read_msg))
  CAF_ADD_TYPE_ID(gost, (gost::state_update_msg))
  CAF_ADD_TYPE_ID(gost, (gost::store_actor))
  CAF_ADD_TYPE_ID(gost, (gost::offer_actor))
  CAF_ADD_TYPE_ID(gost, (gost::shard_actor))
CAF_END_TYPE_ID_BLOCK(gost)
