#pragma once
// What every actor protocol of gost shares: the atoms of the entity kit and the generic pool,
// and the first type-ID block. Each domain (offers, tasks, ...) has its own protocol header
// with its own block chained to the one before it:
//
//   CAF_BEGIN_TYPE_ID_BLOCK(gost_offers, caf::id_block::gost_core::end)
//
// and its own `register_<domain>_types(cfg)`, so a message type is announced exactly once and
// no header knows every domain.

#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/replies_to.hpp>
#include <caf/type_id.hpp>
#include <caf/typed_actor.hpp>

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

/// Registers the core blocks (the kit's and the durable entities'); call once per actor system
/// config, before the domains' blocks.
void register_core_types(caf::actor_system_config& cfg);

} // namespace gost

// The kit's own block; the durable entities' block (gost/core/entity/protocol.hpp) chains to
// its end, and the domains chain theirs after that (gost_offers to gost_entities::end, the next
// domain to gost_offers::end, ...).
CAF_BEGIN_TYPE_ID_BLOCK(gost_core, caf::first_custom_type_id)
CAF_END_TYPE_ID_BLOCK(gost_core)
