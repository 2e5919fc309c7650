#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <caf/error.hpp>
#include <caf/expected.hpp>
#include <caf/make_message.hpp>
#include <caf/message.hpp>

namespace gost::persistence {

/// What went wrong talking to the database. Each code says whether a retry makes sense and
/// maps one-to-one onto a gRPC status code at the edge (runtime/). Storage errors stay
/// storage errors; everything else gost reports is a gost::errc (actors/core/errc.hpp).
enum class db_errc : uint8_t {
  unavailable = 1,  ///< server unreachable or connection lost; retry later (UNAVAILABLE)
  conflict,         ///< optimistic check failed (version changed); reload and redo
                    ///< (ABORTED/FAILED_PRECONDITION)
  not_found,        ///< row does not exist (NOT_FOUND)
  already_exists,   ///< a unique key is taken (ALREADY_EXISTS)
  invalid_argument, ///< the input cannot be stored as given (INVALID_ARGUMENT)
  schema_mismatch,  ///< installation differs from the node's config (e.g. shard_count)
  internal,         ///< a bug or an unexpected server answer (INTERNAL)
  outcome_unknown,  ///< the connection was lost during COMMIT and it is not known whether it
                    ///< committed: never "safe to retry" (read back, or retry with a request id)
};

const char* to_string(db_errc x);

/// True when the same call may succeed later without any change by the caller.
constexpr bool retryable(db_errc x) {
  return x == db_errc::unavailable;
}

/// Builds an error carrying a human-readable message in its context, on one line (libpq's
/// messages come with newlines and tabs: one log record per line).
caf::error make_db_error(db_errc code, std::string message);

/// `text` on one line: every run of newlines, tabs and spaces becomes one space, none at
/// either end.
std::string single_line(std::string_view text);

/// The message of an error made by any gost module (the first string of its context), or
/// CAF's own rendering for foreign errors.
std::string error_message(const caf::error& err);

} // namespace gost::persistence

CAF_ERROR_CODE_ENUM(gost::persistence::db_errc, "db")
