#pragma once
// The protocol of durable entities (entity_type.hpp): what routers, the node link and
// EntityService send to the owner of an entity. Entities are named `kind/id`
// (persistence::entity_key) in every request, so one shard supervisor per shard hosts every
// registered type. Its type-ID block (`gost_entities`) starts at its fixed ID
// (gost/core/type_ids.hpp); `register_entity_types(cfg)` registers the core blocks and this one.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <caf/actor_system_config.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <google/protobuf/any.pb.h>

#include "gost/core/kit/protocol.hpp"
#include "gost/core/proto_inspect.hpp"
#include "gost/core/protocol.hpp"
#include "gost/core/type_ids.hpp"
#include "gost/persistence/entities/entities.hpp"

CAF_ADD_ATOM(gost_entities, gost, send_atom, "send")
CAF_ADD_ATOM(gost_entities, gost, view_atom, "view")
CAF_ADD_ATOM(gost_entities, gost, ask_atom, "ask")

namespace gost {

using any_msg = pb<google::protobuf::Any>;

/// What the owner of an entity tells about it.
struct entity_view {
  bool exists = false; ///< it was ever sent an event
  int64_t version = 0; ///< events handled
  std::optional<google::protobuf::Any> state;
  std::string lane;
  int64_t pending = 0;                           ///< events waiting (timers included)
  int64_t next_due_us = 0;                       ///< the earliest of them (0: none)
  std::vector<persistence::entity_timer> timers; ///< named timers pending, by name
};

/// An ask's request id: its own type, so that an ask forwarded to another node gets one when
/// the client gave none (runtime/cluster/ask_owner.hpp), and a retry after a lost answer is
/// answered from the kept answer instead of handled twice.
struct ask_id {
  std::string value;
  bool empty() const noexcept { return value.empty(); }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ask_id& x) {
  return f(caf::meta::type_name("gost::ask_id"), x.value);
}

/// What an ask gets when the handler did not refuse (a refusal is the ask's error, of category
/// gost::errc): the handler's reply, once everything it did committed.
struct entity_reply {
  std::optional<google::protobuf::Any> reply; ///< none: the handler sent no reply
  int64_t version = 0;                        ///< the entity's version after the ask
};

/// The operations on one durable entity, each naming it first (`kind/id`).
using entity_ops = caf::typed_actor<
  // Stores `event` (an Any of the kind's event type) for the entity, due after the delay (ms);
  // with a non-empty request id at most once per id (a client's retry gets the same answer and
  // stores nothing twice). Answers once committed.
  caf::replies_to<send_atom, std::string, any_msg, std::string, int64_t>::with<ok_atom>,
  // What the entity is now (its committed state, pending events).
  caf::replies_to<view_atom, std::string>::with<entity_view>,
  // Handles `event` at once and answers with the handler's reply after its changes committed,
  // or with its refusal (an error); with a non-empty id at most once per id (a retry gets the
  // first answer).
  caf::replies_to<ask_atom, std::string, any_msg, ask_id>::with<entity_reply>>;

/// What routers hold for durable entities: the operations and the kit's inspection.
using entity_owner_ops = entity_ops::extend_with<kit::inspect_ops>;

/// One actor per live entity.
using durable_actor = kit::entity_actor<entity_ops>;

/// The supervisor of one shard's durable entities (all registered types).
using entity_shard_actor = kit::shard_actor<entity_ops, durable_actor>;

/// Blocking reads of the entity tables (detached): batched loads, and the shard's queue.
using entity_store_actor = caf::typed_actor<
  caf::replies_to<load_atom, std::string>::with<persistence::entity_row>,
  caf::replies_to<due_atom, uint32_t, int64_t, uint32_t,
                  persistence::queue_entries>::with<persistence::queue_entries>,
  // The answer kept for an ask's request id (key, request id); an empty
  // request_id in it: none kept.
  caf::replies_to<ask_atom, std::string, std::string>::with<persistence::entity_answer>>;

/// A group's forwarder (spawn_entity_forwarder): woken after a commit kept events for
/// entities of another shard group. Local to a node (never sent in a message).
using entity_forwarder_actor = caf::typed_actor<caf::reacts_to<wake_atom>>;

/// A write-behind writer of entity write-sets, shared by shards.
using entity_writer_actor = kit::writer_actor<persistence::entity_write>;

/// Registers the core blocks (register_core_types) and the durable entities' block with an
/// actor system config; a second registration of a block changes nothing.
void register_entity_types(caf::actor_system_config& cfg);

} // namespace gost

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(gost::entity_view)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(gost::entity_reply)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(gost::persistence::entity_row)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(gost::persistence::entity_write)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(gost::persistence::entity_answer)

// The durable entities' block, at its fixed start (gost/core/type_ids.hpp).
CAF_BEGIN_TYPE_ID_BLOCK(gost_entities, gost::type_ids::entities)
  CAF_ADD_TYPE_ID(gost_entities, (gost::any_msg))
  CAF_ADD_TYPE_ID(gost_entities, (gost::ask_id))
  CAF_ADD_TYPE_ID(gost_entities, (gost::durable_actor))
  CAF_ADD_TYPE_ID(gost_entities, (gost::entity_shard_actor))
  CAF_ADD_TYPE_ID(gost_entities, (gost::entity_store_actor))
CAF_END_TYPE_ID_BLOCK(gost_entities)

static_assert(caf::id_block::gost_entities::end <= gost::type_ids::offers,
              "gost_entities outgrew its IDs (gost/core/type_ids.hpp)");
