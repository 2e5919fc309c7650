#pragma once
// Test support: scheduled actions (seed 001) read through gost.v1.ScheduledActionService, as the
// e2e tests that move shards check them (each action fires on wherever its group went).

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <grpcpp/grpcpp.h>

#include "gost/testing/process.hpp"
#include "gost/v1/scheduled_actions.grpc.pb.h"

namespace gost::testing {

using scheduled_stub = gost::v1::ScheduledActionService::Stub;

/// Each action's successes as `stub` reads them (Get reads the action's own group).
inline std::map<std::string, int64_t> successes_of(scheduled_stub& stub,
                                                   const std::vector<std::string>& ids) {
  std::map<std::string, int64_t> out;
  for (auto& id : ids) {
    gost::v1::GetScheduledActionRequest req;
    req.set_id(id);
    gost::v1::GetScheduledActionResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds{20});
    auto st = stub.Get(&ctx, req, &resp);
    REQUIRE_MESSAGE(st.ok(), id << ": " << st.error_message());
    out[id] = resp.action().status().successes();
  }
  return out;
}

/// Waits (a minute at most) until every action of `floor` fired at least twice more than it
/// says.
inline bool fire_twice_more(scheduled_stub& stub, const std::map<std::string, int64_t>& floor) {
  std::vector<std::string> ids;
  for (auto& f : floor)
    ids.push_back(f.first);
  return eventually(std::chrono::seconds{60}, [&] {
    for (auto& [id, n] : successes_of(stub, ids))
      if (n < floor.at(id) + 2)
        return false;
    return true;
  });
}

} // namespace gost::testing
