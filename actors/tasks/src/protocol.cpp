#include "gost/tasks/protocol.hpp"

#include <cctype>

#include "gost/entities/protocol.hpp"

namespace gost::tasks {

namespace {

constexpr std::string_view kind_prefix = "task.";

} // namespace

std::string task_kind(std::string_view task_type) {
  return std::string{kind_prefix} + std::string{task_type};
}

std::optional<std::string> task_type_of_kind(std::string_view kind) {
  if (kind.size() <= kind_prefix.size() || kind.substr(0, kind_prefix.size()) != kind_prefix)
    return std::nullopt;
  return std::string{kind.substr(kind_prefix.size())};
}

std::string check_group_id(std::string_view group) {
  if (group.empty() || group.size() > 64)
    return "must be 1..64 characters";
  for (auto ch : group)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '_' && ch != '-')
      return "may hold only letters, digits, '.', '_' and '-'";
  return {};
}

std::string task_id(std::string_view group, std::string_view key) {
  return std::string{group} + ":" + std::string{key};
}

std::optional<std::string> group_of_task(std::string_view id) {
  auto colon = id.find(':');
  if (colon == std::string_view::npos || colon + 1 == id.size())
    return std::nullopt;
  auto group = id.substr(0, colon);
  if (!check_group_id(group).empty())
    return std::nullopt;
  return std::string{group};
}

void register_task_types(caf::actor_system_config& cfg) {
  register_entity_types(cfg);
  cfg.add_message_types<caf::id_block::gost_tasks>();
}

} // namespace gost::tasks
