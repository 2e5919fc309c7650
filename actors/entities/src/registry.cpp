// The entity types of a node, by kind (gost/entities/entity_type.hpp).
#include <cctype>

#include "gost/entities/entity_type.hpp"

namespace gost {

caf::error entity_registry::add(std::shared_ptr<const entity_type_base> type) {
  auto kind = type->kind();
  if (kind.empty() || kind.size() > 64)
    return make_error(errc::invalid_argument,
                      "entity kind `" + kind + "` must be 1..64 characters");
  for (auto ch : kind)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '_' && ch != '-')
      return make_error(errc::invalid_argument,
                        "entity kind `" + kind
                          + "` may hold only letters, digits, '.', '_' and '-'");
  if (find(kind) != nullptr)
    return make_error(errc::already_exists, "entity kind `" + kind + "` is registered twice");
  types_.push_back(std::move(type));
  return {};
}

const entity_type_base* entity_registry::find(std::string_view kind) const {
  for (auto& t : types_)
    if (t->kind() == kind)
      return t.get();
  return nullptr;
}

} // namespace gost
