#include "status.hpp"

#include <caf/sec.hpp>

#include "gost/persistence/errors.hpp"

namespace gost::runtime {

grpc::Status to_status(const caf::error& err) {
  using persistence::db_errc;
  if (!err)
    return grpc::Status::OK;
  auto msg = persistence::error_message(err);
  if (err.category() == caf::atom("db")) {
    switch (static_cast<db_errc>(err.code())) {
      case db_errc::unavailable: return {grpc::StatusCode::UNAVAILABLE, msg + " (safe to retry)"};
      case db_errc::conflict: return {grpc::StatusCode::FAILED_PRECONDITION, msg};
      case db_errc::not_found: return {grpc::StatusCode::NOT_FOUND, msg};
      case db_errc::already_exists: return {grpc::StatusCode::ALREADY_EXISTS, msg};
      case db_errc::invalid_argument: return {grpc::StatusCode::INVALID_ARGUMENT, msg};
      case db_errc::fenced:
        return {grpc::StatusCode::UNAVAILABLE, msg + " (the shard moved; retry)"};
      case db_errc::schema_mismatch: return {grpc::StatusCode::FAILED_PRECONDITION, msg};
      case db_errc::internal: return {grpc::StatusCode::INTERNAL, msg};
      case db_errc::moved: return {grpc::StatusCode::UNAVAILABLE, msg + " (safe to retry)"};
    }
  }
  if (err.category() == caf::atom("system")) {
    switch (static_cast<caf::sec>(err.code())) {
      case caf::sec::request_timeout:
        return {grpc::StatusCode::DEADLINE_EXCEEDED,
                "the node did not answer within api.request_timeout"};
      case caf::sec::request_receiver_down:
      case caf::sec::no_context:
        return {grpc::StatusCode::UNAVAILABLE, "the owning actor stopped; retry"};
      default: break;
    }
  }
  return {grpc::StatusCode::INTERNAL, msg};
}

} // namespace gost::runtime
