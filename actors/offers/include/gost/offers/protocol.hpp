#pragma once
// The offer domain's protocol: its atoms, message types and typed interfaces. Its message
// types are announced once, in the type-ID block at the end (at the offers' fixed start,
// gost/core/type_ids.hpp), and `register_offer_types(cfg)` registers the core blocks and this
// one with a config. Other domains and runtime/ reach offers only through this header.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/allowed_unsafe_message_type.hpp>

#include "gost/core/errc.hpp"
#include "gost/core/kit/protocol.hpp"
#include "gost/core/proto_inspect.hpp"
#include "gost/core/protocol.hpp"
#include "gost/core/type_ids.hpp"
#include "gost/persistence/offers/offer_store.hpp"
#include "gost/persistence/offers/write_behind.hpp"
#include "gost/v1/offer.pb.h"
#include "gost/v1/state_service.pb.h"

// -- atoms of the offer domain (the kit's are in gost/core/protocol.hpp) -------------------

CAF_ADD_ATOM(gost_offers, gost, create_atom, "create")
CAF_ADD_ATOM(gost_offers, gost, find_atom, "find")
CAF_ADD_ATOM(gost_offers, gost, scan_atom, "scan")
CAF_ADD_ATOM(gost_offers, gost, list_atom, "list")
CAF_ADD_ATOM(gost_offers, gost, state_atom, "state")
CAF_ADD_ATOM(gost_offers, gost, rescan_atom, "rescan")
CAF_ADD_ATOM(gost_offers, gost, requeue_atom, "requeue")

namespace gost {

using caf::delete_atom;
using caf::delete_atom_v;
using caf::update_atom;
using caf::update_atom_v;

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

using persistence::queue_entries;
using offer_snapshots = std::vector<offer_snapshot>;
using offer_list = std::vector<v1::Offer>;

/// "No version expected": an update or delete that applies whatever the current version.
constexpr int64_t any_version = -1;

/// The idempotency key of a write (issue 12, "one true answer per write"): the client's, or the
/// one a node gives a call it forwards. A write carrying one commits at most once per offer; a
/// retry with the same id — after a timeout, through another node, after the owner moved —
/// gets the first answer and changes nothing. Empty: none (every call is a new write).
/// It also says who made the write — `source` (api, feed, state-api:<stage>) and `by` (the
/// caller) — which the change's outbox event and the offer's history record.
struct request_id {
  std::string value;
  std::string source; ///< empty: "api"
  std::string by;
  bool empty() const noexcept { return value.empty(); }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, request_id& x) {
  return f(caf::meta::type_name("gost::request_id"), x.value, x.source, x.by);
}

// -- interfaces -------------------------------------------------------------------------------

/// Blocking reads of stored offers and queues; runs on its own thread (spawned detached). All
/// writes go through the shard's writer_actor.
/// Errors: db_errc values (gost/persistence/errors.hpp); errc::not_found for a missing key.
using store_actor = caf::typed_actor<
  // The stored offer with its states and queue entries (found = false when there is none).
  caf::replies_to<load_atom, std::string>::with<offer_snapshot>,
  // Queue entries of a shard due before a time (µs since the epoch), earliest first, after a
  // cursor entry (an empty stage id: from the start), at most a page.
  caf::replies_to<due_atom, uint32_t, int64_t, uint32_t, queue_entries>::with<queue_entries>,
  // A rescan page: the next offers of a shard after an id, with states and queue entries.
  caf::replies_to<scan_atom, uint32_t, std::string, uint32_t>::with<offer_snapshots>,
  // A sweep's progress on a shard (token, shard): the last offer id passed, the offers enqueued
  // so far, whether it is done (shard_options::sweeps).
  caf::replies_to<load_atom, scan_atom, std::string, uint32_t>::with<std::string, int64_t, bool>,
  // Records a sweep's progress (token, shard, last offer id, enqueued, done); a failure is
  // logged by the store (the sweep goes on: at worst it repeats pages after a restart).
  caf::reacts_to<update_atom, scan_atom, std::string, uint32_t, std::string, int64_t, bool>,
  // The id of the offer under the seller's key (seller_id, namespace, external_id), or
  // errc::not_found.
  caf::replies_to<find_atom, std::string, std::string, std::string>::with<std::string>,
  // Removes the claim of a seller's key (seller_id, namespace, external_id) held for an offer
  // (its id) a split left in another group and whose owner answered it is gone; true when one
  // was removed (persistence::offer_store::drop_claim).
  caf::replies_to<delete_atom, std::string, std::string, std::string, std::string>::with<bool>,
  // The answer kept with a write's request id (offer id, request id); empty when no write with
  // this id is kept (none committed, or it was reaped after api.request_ttl).
  caf::replies_to<find_atom, std::string, request_id>::with<std::string>,
  // A page of a seller's offers in the store's database: (seller, filter by namespace?,
  // namespace, after id, limit), with the other groups holding offers of the seller (read in
  // its home group's; persistence::offer_store::list_by_seller).
  caf::replies_to<list_atom, std::string, bool, std::string, std::string,
                  uint32_t>::with<persistence::seller_page>>;

/// The operations on one offer. Each names its offer first, right after its atoms
/// (gost/core/routing.hpp), so shards, routers and node links forward every operation the
/// same way; the offer actor serializes them. An operation is added here, handled in the
/// offer actor, and mapped to protobuf for the node link in one table
/// (runtime/cluster/link_table.hpp); nothing else spells it out.
using offer_ops = caf::typed_actor<
  // Creates offer `id` from the content (its id field is ignored); version and timestamps are
  // set by the actor. Replies the stored offer.
  caf::replies_to<create_atom, std::string, offer_msg, request_id>::with<offer_msg>,
  caf::replies_to<get_atom, std::string>::with<offer_msg>,
  // New content for offer `id`; the int64 is the expected current version or any_version; the
  // string is a field mask (comma-separated top-level Offer fields to take from the new
  // content; empty: all of them).
  caf::replies_to<update_atom, std::string, offer_msg, int64_t, std::string,
                  request_id>::with<offer_msg>,
  // Replies the version of the deletion.
  caf::replies_to<delete_atom, std::string, int64_t, request_id>::with<int64_t>,
  // A stage's state of the offer: (offer id, stage id).
  caf::replies_to<get_atom, state_atom, std::string, std::string>::with<state_read_msg>,
  // Compare-and-set of a stage's state: (offer id, stage id, serialized google.protobuf.Any,
  // expected state version). A stale version answers updated = false, not an error.
  caf::replies_to<update_atom, state_atom, std::string, std::string, std::string, int64_t,
                  request_id>::with<state_update_msg>,
  // An operator's re-queue (gostctl requeue): puts the offer into the queue of a stage, due
  // now, through the write-behind layer (fenced by the shard's lease), so the stage runs on it
  // again once. Replies the entry's due time (µs since the epoch).
  caf::replies_to<requeue_atom, std::string, std::string, request_id>::with<int64_t>>;

/// Everything a request for an offer may ask of the owner of its shard, on this node or through
/// a node link: what routers hold (the operations and the kit's inspection).
using offer_owner_ops = offer_ops::extend_with<kit::inspect_ops>;

/// One actor per resident offer: the offer operations and the kit's entity interface (a lane
/// is a stage: `run` runs a due stage).
using offer_actor = kit::entity_actor<offer_ops>;

/// One supervisor per shard (the kit's shard, gost/core/kit/shard.hpp): spawns offer actors on
/// demand and forwards to them, schedules the stage queues; plus the background rescan and the
/// sweeps (a sweep by its index in shard_options::sweeps, started again from its progress).
using shard_actor = kit::shard_actor<offer_ops, offer_actor, caf::reacts_to<rescan_atom>,
                                     caf::reacts_to<rescan_atom, uint32_t>>;

/// A write-behind writer of offers (gost/core/kit/writer.hpp), shared by several shards.
using writer_actor = kit::writer_actor<persistence::write_set>;

/// Registers the core block and the offer domain's message types with an actor system config
/// (call once per config).
void register_offer_types(caf::actor_system_config& cfg);

} // namespace gost

// Process-local message types: never serialized.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(gost::offer_snapshot)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(gost::offer_snapshots)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(gost::offer_list)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(gost::persistence::seller_page)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(gost::persistence::write_set)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(gost::persistence::write_outcome)

CAF_BEGIN_TYPE_ID_BLOCK(gost_offers, gost::type_ids::offers)
  CAF_ADD_TYPE_ID(gost_offers, (gost::offer_msg))
  CAF_ADD_TYPE_ID(gost_offers, (gost::request_id))
  CAF_ADD_TYPE_ID(gost_offers, (gost::state_read_msg))
  CAF_ADD_TYPE_ID(gost_offers, (gost::state_update_msg))
  CAF_ADD_TYPE_ID(gost_offers, (gost::store_actor))
  CAF_ADD_TYPE_ID(gost_offers, (gost::offer_actor))
  CAF_ADD_TYPE_ID(gost_offers, (gost::shard_actor))
CAF_END_TYPE_ID_BLOCK(gost_offers)

static_assert(caf::id_block::gost_offers::end <= gost::type_ids::tasks,
              "gost_offers outgrew its IDs (gost/core/type_ids.hpp)");
