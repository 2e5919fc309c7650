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

#include "gost/actors/proto_inspect.hpp"
#include "gost/v1/offer.pb.h"

namespace gost {

// -- atoms (text at most 10 characters) -----------------------------------------------------

using create_atom = caf::atom_constant<caf::atom("create")>;
using load_atom = caf::atom_constant<caf::atom("load")>;
using insert_atom = caf::atom_constant<caf::atom("insert")>;
using passivate_atom = caf::atom_constant<caf::atom("passivate")>;
using find_atom = caf::atom_constant<caf::atom("find")>;
using caf::delete_atom;
using caf::get_atom;
using caf::ok_atom;
using caf::update_atom;

// -- message types ----------------------------------------------------------------------------

using offer_msg = pb<v1::Offer>;

/// "No version expected": an update or delete that applies whatever the current version.
constexpr int64_t any_version = -1;

// -- interfaces -------------------------------------------------------------------------------

/// Blocking access to stored offers; runs on its own thread (spawned detached).
/// Errors: db_errc values (see gost/persistence/errors.hpp).
using store_actor = caf::typed_actor<
  // The stored offer, or db_errc::not_found.
  caf::replies_to<load_atom, std::string>::with<offer_msg>,
  // Inserts a new offer (version 1) into the given shard.
  caf::replies_to<insert_atom, offer_msg, uint32_t>::with<ok_atom>,
  // Compare-and-set on the version the offer had before this change.
  caf::replies_to<update_atom, offer_msg, int64_t>::with<ok_atom>,
  caf::replies_to<delete_atom, std::string, int64_t>::with<ok_atom>,
  // The id of the offer under the seller's key (seller_id, namespace, external_id), or
  // db_errc::not_found.
  caf::replies_to<find_atom, std::string, std::string, std::string>::with<std::string>>;

/// The operations on one offer. Shards route them to offer actors, which serialize them.
using offer_ops = caf::typed_actor<
  // Creates the offer; id, version and timestamps are set by the actor. Replies the stored offer.
  caf::replies_to<create_atom, offer_msg>::with<offer_msg>,
  caf::replies_to<get_atom, std::string>::with<offer_msg>,
  // New content; the int64 is the expected current version or any_version.
  caf::replies_to<update_atom, offer_msg, int64_t>::with<offer_msg>,
  // Replies the version of the deletion.
  caf::replies_to<delete_atom, std::string, int64_t>::with<int64_t>>;

/// One actor per resident offer.
using offer_actor = offer_ops::extend<
  // Sent by its shard when the actor asked to passivate and the shard agreed: stop now.
  caf::reacts_to<passivate_atom, ok_atom>>;

/// One supervisor per shard: spawns offer actors on demand and forwards to them.
using shard_actor = offer_ops::extend<
  // An idle offer actor asks to stop; sent by the offer actor itself.
  caf::reacts_to<passivate_atom, std::string>>;

/// Registers gost's message types with an actor system config (call once per config).
void register_types(caf::actor_system_config& cfg);

} // namespace gost

CAF_BEGIN_TYPE_ID_BLOCK(gost, caf::first_custom_type_id)
  CAF_ADD_TYPE_ID(gost, (gost::offer_msg))
  CAF_ADD_TYPE_ID(gost, (gost::store_actor))
  CAF_ADD_TYPE_ID(gost, (gost::offer_actor))
  CAF_ADD_TYPE_ID(gost, (gost::shard_actor))
CAF_END_TYPE_ID_BLOCK(gost)
