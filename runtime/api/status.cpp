#include "api/status.hpp"

#include <caf/sec.hpp>

#include "gost/core/errc.hpp"

namespace gost::runtime {

grpc::Status to_status(const caf::error& err) {
  using persistence::db_errc;
  if (!err)
    return grpc::Status::OK;
  auto msg = error_message(err);
  if (err.category() == caf::atom("gost")) {
    switch (static_cast<errc>(err.code())) {
      case errc::moved: return {grpc::StatusCode::UNAVAILABLE, msg + " (safe to retry)"};
      case errc::fenced: return {grpc::StatusCode::UNAVAILABLE, msg + " (the shard moved; retry)"};
      case errc::overloaded: return {grpc::StatusCode::RESOURCE_EXHAUSTED, msg + " (retry later)"};
      case errc::unavailable: return {grpc::StatusCode::UNAVAILABLE, msg + " (safe to retry)"};
      case errc::not_found: return {grpc::StatusCode::NOT_FOUND, msg};
      case errc::invalid_argument: return {grpc::StatusCode::INVALID_ARGUMENT, msg};
      case errc::conflict: return {grpc::StatusCode::FAILED_PRECONDITION, msg};
      case errc::already_exists: return {grpc::StatusCode::ALREADY_EXISTS, msg};
      case errc::failed_precondition: return {grpc::StatusCode::FAILED_PRECONDITION, msg};
      case errc::outcome_unknown: return {grpc::StatusCode::UNKNOWN, msg};
      case errc::internal: return {grpc::StatusCode::INTERNAL, msg};
    }
  }
  if (err.category() == caf::atom("db")) {
    switch (static_cast<db_errc>(err.code())) {
      case db_errc::unavailable: return {grpc::StatusCode::UNAVAILABLE, msg + " (safe to retry)"};
      case db_errc::conflict: return {grpc::StatusCode::FAILED_PRECONDITION, msg};
      case db_errc::not_found: return {grpc::StatusCode::NOT_FOUND, msg};
      case db_errc::already_exists: return {grpc::StatusCode::ALREADY_EXISTS, msg};
      case db_errc::invalid_argument: return {grpc::StatusCode::INVALID_ARGUMENT, msg};
      case db_errc::schema_mismatch: return {grpc::StatusCode::FAILED_PRECONDITION, msg};
      case db_errc::internal: return {grpc::StatusCode::INTERNAL, msg};
      case db_errc::outcome_unknown: return {grpc::StatusCode::UNKNOWN, msg};
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

disposition classify(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
    case grpc::StatusCode::ABORTED: return disposition::retry;
    default: return disposition::fail;
  }
}

} // namespace gost::runtime
