#pragma once
// gRPC calls for e2e tests: a unary call with a deadline through a generated stub, and one
// with raw request bytes through a generic stub (no generated client: bytes of any size or
// shape reach the server as they are).

#include <chrono>
#include <future>
#include <memory>
#include <string>

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

/// A unary call of `method` ("/pkg.Service/Method") with `bytes` as the request.
inline grpc::Status raw_call(const std::shared_ptr<grpc::Channel>& channel,
                             const std::string& method, const std::string& bytes) {
  grpc::GenericStub generic{channel};
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds{10});
  grpc::Slice slice{bytes};
  grpc::ByteBuffer request{&slice, 1};
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  generic.UnaryCall(&ctx, method, grpc::StubOptions{}, &request, &response,
                    [&](grpc::Status st) { done.set_value(st); });
  return done.get_future().get();
}

} // namespace gost::testing
