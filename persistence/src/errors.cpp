#include "gost/persistence/errors.hpp"

#include <caf/make_message.hpp>
#include <caf/message.hpp>

namespace gost::persistence {

const char* to_string(db_errc x) {
  switch (x) {
    case db_errc::unavailable: return "unavailable";
    case db_errc::conflict: return "conflict";
    case db_errc::not_found: return "not_found";
    case db_errc::already_exists: return "already_exists";
    case db_errc::invalid_argument: return "invalid_argument";
    case db_errc::schema_mismatch: return "schema_mismatch";
    case db_errc::internal: return "internal";
    case db_errc::outcome_unknown: return "outcome_unknown";
  }
  return "unknown";
}

caf::error make_db_error(db_errc code, std::string message) {
  return caf::make_error(code, single_line(message));
}

std::string single_line(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool gap = false;
  for (char c : text) {
    if (c == '\n' || c == '\r' || c == '\t' || c == ' ') {
      gap = true;
      continue;
    }
    if (gap && !out.empty())
      out += ' ';
    gap = false;
    out += c;
  }
  return out;
}

std::string error_message(const caf::error& err) {
  if (!err)
    return {};
  auto& ctx = err.context();
  if (ctx.size() >= 1 && ctx.match_element<std::string>(0))
    return ctx.get_as<std::string>(0);
  return caf::to_string(err);
}

} // namespace gost::persistence
