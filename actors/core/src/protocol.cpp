#include "gost/core/protocol.hpp"

#include "gost/core/errc.hpp"

namespace gost {

void register_core_types(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::gost_core>();
  cfg.add_error_category(
    caf::atom("db"), [](uint8_t code, caf::atom_value, const caf::message& ctx) -> std::string {
      auto text =
        std::string{"db:"} + persistence::to_string(static_cast<persistence::db_errc>(code));
      if (ctx.size() >= 1 && ctx.match_element<std::string>(0))
        text += ": " + ctx.get_as<std::string>(0);
      return text;
    });
  cfg.add_error_category(caf::atom("gost"),
                         [](uint8_t code, caf::atom_value, const caf::message& ctx) -> std::string {
                           auto text = std::string{"gost:"} + to_string(static_cast<errc>(code));
                           if (ctx.size() >= 1 && ctx.match_element<std::string>(0))
                             text += ": " + ctx.get_as<std::string>(0);
                           return text;
                         });
}

} // namespace gost
