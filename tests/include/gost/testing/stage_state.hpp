#pragma once
// Test support: a stage's stored state of an offer, read through StateService.Read as clients
// read it, unpacked into the stage's own message (tests of applications' stages and gost's).

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <doctest/doctest.h>
#include <grpcpp/grpcpp.h>

#include "gost/v1/state_service.grpc.pb.h"

namespace gost::testing {

template <class M>
struct stored_state {
  M state;             ///< default when the stage stored none
  int64_t version = 0; ///< 0: none yet
};

/// The state stage `stage` stored for `offer`; the call and the unpacking must succeed.
template <class M>
stored_state<M> read_state(const std::shared_ptr<grpc::Channel>& channel, const std::string& offer,
                           const std::string& stage) {
  auto stub = v1::StateService::NewStub(channel);
  v1::ReadStateRequest req;
  req.set_offer_id(offer);
  req.set_stage_id(stage);
  v1::ReadStateResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds{10});
  auto s = stub->Read(&ctx, req, &resp);
  REQUIRE_MESSAGE(s.ok(), s.error_message());
  stored_state<M> out;
  out.version = resp.version();
  if (resp.has_state())
    REQUIRE_MESSAGE(resp.state().UnpackTo(&out.state), resp.state().type_url());
  return out;
}

} // namespace gost::testing
