#pragma once
// Errors leave the node as gRPC statuses here, and only here.

#include <caf/error.hpp>
#include <grpcpp/support/status.h>

#include "gost/core/errc.hpp"

namespace gost::runtime {

/// Maps any error gost reports (gost::errc, persistence::db_errc, CAF's sec: timeouts, dead
/// actors) to a gRPC status whose message says what happened and, where the client can act,
/// what to change. The one such mapping of the node.
grpc::Status to_status(const caf::error& err);

/// What a caller of another gRPC service (an external stage, a peer node) does with its status:
/// the same classification as `gost::classify` for gost's own errors.
disposition classify(grpc::StatusCode code);

inline grpc::Status invalid(std::string message) {
  return {grpc::StatusCode::INVALID_ARGUMENT, std::move(message)};
}

} // namespace gost::runtime
