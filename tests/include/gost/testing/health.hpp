#pragma once
// Test support: ask a node's gRPC health service (grpc.health.v1.Health/Check) through a
// generic stub, so tests need no health proto.

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

namespace gost::testing {

/// The status the node reports for the whole server (service ""): 1 SERVING, 2 NOT_SERVING;
/// -1 when the call failed or the answer is not a HealthCheckResponse.
inline int health_status(const std::shared_ptr<grpc::Channel>& channel) {
  grpc::GenericStub generic{channel};
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds{5});
  grpc::Slice empty{std::string{}}; // HealthCheckRequest{}: no bytes
  grpc::ByteBuffer request{&empty, 1};
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  generic.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions{}, &request, &response,
                    [&](grpc::Status st) { done.set_value(st); });
  if (!done.get_future().get().ok())
    return -1;
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok())
    return -1;
  std::string bytes;
  for (auto& sl : slices)
    bytes.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
  // HealthCheckResponse{status}: field 1 as a varint, `08 NN`.
  return bytes.size() == 2 && bytes[0] == '\x08' ? bytes[1] : -1;
}

} // namespace gost::testing
