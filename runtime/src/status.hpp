#pragma once
// Errors leave the node as gRPC statuses here, and only here.

#include <caf/error.hpp>
#include <grpcpp/support/status.h>

namespace gost::runtime {

/// Maps a gost error (db_errc) or a CAF error (timeouts, dead actors) to a gRPC status whose
/// message says what happened and, where the client can act, what to change.
grpc::Status to_status(const caf::error& err);

inline grpc::Status invalid(std::string message) {
  return {grpc::StatusCode::INVALID_ARGUMENT, std::move(message)};
}

} // namespace gost::runtime
