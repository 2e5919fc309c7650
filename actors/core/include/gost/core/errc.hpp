#pragma once
// The project's error model (docs/architecture.md, "Errors"):
//
// - `gost::errc` (category "gost") for everything that is not storage: routing, leases,
//   overload, entity rules, bad input;
// - `persistence::db_errc` (category "db") stays what the database said;
// - CAF's own `caf::sec` (category "system") for what CAF reports (a dead receiver, a
//   timeout).
//
// Every caller decides what to do with one function, `classify`, instead of its own list of
// codes, and runtime/api/status.cpp maps every code to one gRPC status. Errors are values
// (`caf::expected`, `caf::error`); messages say what to change.

#include <cstdint>
#include <string>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "gost/persistence/errors.hpp"

namespace gost {

enum class errc : uint8_t {
  /// The entity's shard is not on this node (any more); nothing was done. Route again.
  moved = 1,
  /// This node lost the shard's lease; nothing was written. Route again.
  fenced,
  /// A bounded queue is full (a pool, a writer); nothing was done. Retry later.
  overloaded,
  /// A service the work needs is down (a stage's backend); nothing was done. Retry later.
  unavailable,
  /// The entity (or what the request names) does not exist.
  not_found,
  /// The request cannot be carried out as given; the message names what to fix.
  invalid_argument,
  /// The expected version did not match, or the entity kept changing.
  conflict,
  /// An entity with this id or key exists already.
  already_exists,
  /// The work may have been carried out, or not: only reading it back tells.
  outcome_unknown,
  /// A broken invariant or an unexpected answer (a bug).
  internal,
  /// The system is not in the state the request needs (the message says which); asking
  /// again changes nothing until that state changes.
  failed_precondition,
};

const char* to_string(errc x);

/// An error of category "gost" carrying `message` (what happened, and what to change).
caf::error make_error(errc code, std::string message);

/// What a caller does with an error.
enum class disposition : uint8_t {
  retry,   ///< the same call may succeed later without any change (back off first)
  reroute, ///< the call was not carried out where it went: ask the (new) owner again
  fail,    ///< report it: retrying the same call cannot help (or could apply it twice)
};

/// The one classification of every error gost handles: gost::errc, persistence::db_errc and
/// CAF's sec. Unknown categories fail.
disposition classify(const caf::error& err);

/// The human-readable message of any gost error (the first string of its context), or CAF's
/// rendering of a foreign one.
using persistence::error_message;

} // namespace gost

CAF_ERROR_CODE_ENUM(gost::errc, "gost")
