#pragma once
// gRPC calls for e2e tests: a unary call with a deadline through a generated stub, one with
// raw request bytes through a generic stub (no generated client: bytes of any size or shape
// reach the server as they are), and the node's health status through the latter (tests need
// no health proto).

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

namespace gost::testing {

/// `fn(ctx, req, &resp)` (a stub's method bound in a lambda) with a 10 s deadline.
template <class Req, class Resp, class Fn>
grpc::Status call(Fn fn, const Req& req, Resp& resp) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds{10});
  return fn(&ctx, req, &resp);
}

/// A unary call of `method` ("/pkg.Service/Method") with `bytes` as the request; the answer's
/// bytes go to `answer` when given.
inline grpc::Status raw_call(const std::shared_ptr<grpc::Channel>& channel,
                             const std::string& method, const std::string& bytes,
                             std::string* answer = nullptr) {
  grpc::GenericStub generic{channel};
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds{10});
  grpc::Slice slice{bytes};
  grpc::ByteBuffer request{&slice, 1};
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  generic.UnaryCall(&ctx, method, grpc::StubOptions{}, &request, &response,
                    [&](grpc::Status st) { done.set_value(st); });
  auto st = done.get_future().get();
  std::vector<grpc::Slice> slices;
  if (answer != nullptr && st.ok() && response.Dump(&slices).ok())
    for (auto& sl : slices)
      answer->append(reinterpret_cast<const char*>(sl.begin()), sl.size());
  return st;
}

/// The status the node reports for the whole server (grpc.health.v1.Health/Check, service
/// ""): 1 SERVING, 2 NOT_SERVING; -1 when the call failed or the answer is not a
/// HealthCheckResponse.
inline int health_status(const std::shared_ptr<grpc::Channel>& channel) {
  std::string bytes; // HealthCheckRequest{}: no bytes; the answer is field 1 as a varint, 08 NN
  if (!raw_call(channel, "/grpc.health.v1.Health/Check", {}, &bytes).ok())
    return -1;
  return bytes.size() == 2 && bytes[0] == '\x08' ? bytes[1] : -1;
}

} // namespace gost::testing
