#include "gost/core/errc.hpp"

#include <caf/sec.hpp>

namespace gost {

const char* to_string(errc x) {
  switch (x) {
    case errc::moved: return "moved";
    case errc::fenced: return "fenced";
    case errc::overloaded: return "overloaded";
    case errc::unavailable: return "unavailable";
    case errc::not_found: return "not_found";
    case errc::invalid_argument: return "invalid_argument";
    case errc::conflict: return "conflict";
    case errc::already_exists: return "already_exists";
    case errc::failed_precondition: return "failed_precondition";
    case errc::outcome_unknown: return "outcome_unknown";
    case errc::internal: return "internal";
  }
  return "unknown";
}

caf::error make_error(errc code, std::string message) {
  return caf::make_error(code, std::move(message));
}

disposition classify(const caf::error& err) {
  if (!err)
    return disposition::fail;
  if (err.category() == caf::atom("gost")) {
    switch (static_cast<errc>(err.code())) {
      case errc::moved:
      case errc::fenced: return disposition::reroute;
      case errc::overloaded:
      case errc::unavailable: return disposition::retry;
      default: return disposition::fail;
    }
  }
  if (err.category() == caf::atom("db"))
    return persistence::retryable(static_cast<persistence::db_errc>(err.code()))
             ? disposition::retry
             : disposition::fail;
  if (err.category() == caf::atom("system")) {
    switch (static_cast<caf::sec>(err.code())) {
      // The receiver is gone (a stopped shard, a lost node): the request was not handled.
      case caf::sec::request_receiver_down:
      case caf::sec::no_route_to_receiving_node:
      case caf::sec::remote_linking_failed: return disposition::reroute;
      default: return disposition::fail;
    }
  }
  return disposition::fail;
}

} // namespace gost
