#pragma once
// What every actor protocol of gost shares: the atoms of the entity kit and the generic pool,
// and the first type-ID block. Each domain (offers, tasks, ...) has its own protocol header
// with its own block at the domain's fixed start (gost/core/type_ids.hpp):
//
//   CAF_BEGIN_TYPE_ID_BLOCK(gost_offers, gost::type_ids::offers)
//
// and its own `register_<domain>_types(cfg)`, so a message type is announced exactly once and
// no header knows every domain, or the domain before its own.

#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/replies_to.hpp>
#include <caf/type_id.hpp>
#include <caf/typed_actor.hpp>

#include "gost/core/type_ids.hpp"

// -- atoms (text at most 10 characters) -----------------------------------------------------

// The entity kit: shards, entity actors, writers, loaders.
CAF_ADD_ATOM(gost_core, gost, run_atom, "run")
CAF_ADD_ATOM(gost_core, gost, load_atom, "load")
CAF_ADD_ATOM(gost_core, gost, write_atom, "write")
CAF_ADD_ATOM(gost_core, gost, due_atom, "due")
CAF_ADD_ATOM(gost_core, gost, warm_atom, "warm")
CAF_ADD_ATOM(gost_core, gost, passivate_atom, "passivate")
CAF_ADD_ATOM(gost_core, gost, stopped_atom, "stopped")
CAF_ADD_ATOM(gost_core, gost, enqueued_atom, "enqueued")
CAF_ADD_ATOM(gost_core, gost, resident_atom, "resident")
CAF_ADD_ATOM(gost_core, gost, mailbox_atom, "mailbox")
CAF_ADD_ATOM(gost_core, gost, drain_atom, "drain")
CAF_ADD_ATOM(gost_core, gost, flush_atom, "flush")
CAF_ADD_ATOM(gost_core, gost, tick_atom, "tick")
CAF_ADD_ATOM(gost_core, gost, wake_atom, "wake")
CAF_ADD_ATOM(gost_core, gost, poll_atom, "poll")
CAF_ADD_ATOM(gost_core, gost, sweep_atom, "sweep")
CAF_ADD_ATOM(gost_core, gost, pump_atom, "pump")
CAF_ADD_ATOM(gost_core, gost, pause_atom, "pause")

namespace gost {

using caf::get_atom;
using caf::get_atom_v;
using caf::ok_atom;
using caf::ok_atom_v;

/// Registers the kit's block and gost's error categories with an actor system config. Each domain's
/// `register_<domain>_types` calls it too; a second registration of a block changes nothing.
void register_core_types(caf::actor_system_config& cfg);

} // namespace gost

// The kit's own block (empty today: the kit's messages are atoms, built-in types and
// process-local structs); the durable entities' (actors/entities/) and each domain's start at
// their own fixed IDs (gost/core/type_ids.hpp).
CAF_BEGIN_TYPE_ID_BLOCK(gost_core, gost::type_ids::core)
CAF_END_TYPE_ID_BLOCK(gost_core)

static_assert(caf::id_block::gost_core::end <= gost::type_ids::entities,
              "gost_core outgrew its IDs (gost/core/type_ids.hpp)");
