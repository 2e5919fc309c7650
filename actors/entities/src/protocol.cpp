#include "gost/entities/protocol.hpp"

namespace gost {

void register_entity_types(caf::actor_system_config& cfg) {
  register_core_types(cfg);
  cfg.add_message_types<caf::id_block::gost_entities>();
}

} // namespace gost
