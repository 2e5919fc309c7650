#pragma once
// Sending an offer operation to whoever owns the offer's shard, on this node or another, and
// riding out a shard move. Used by the gRPC services' short-lived call actors.

#include <chrono>
#include <functional>
#include <string>

#include <caf/event_based_actor.hpp>
#include <grpcpp/support/callback_common.h>
#include <grpcpp/impl/codegen/server_context.h>

#include "cluster.hpp"
#include "gost/persistence/errors.hpp"
#include "router.hpp"

namespace gost::runtime {

using fail_fn = std::function<void(const caf::error&)>;

/// May the request go to the shard's (new) owner again? Yes when it was not acted upon: the
/// shard is moving (moved), its lease was lost (fenced: nothing was written), or the owner
/// went away (the actor or the connection to its node is gone).
inline bool reroutable(const caf::error& err) {
  return err == persistence::db_errc::moved || err == persistence::db_errc::fenced
         || err == caf::sec::request_receiver_down || err == caf::sec::remote_linking_failed
         || err == caf::sec::no_route_to_receiving_node;
}

using clock_type = std::chrono::steady_clock;

/// How long a call may take: the server's limit (`api.request_timeout`), or less when the
/// client's deadline comes earlier (gRPC deadlines are wall-clock times).
inline std::chrono::milliseconds call_budget(const grpc::CallbackServerContext* ctx,
                                             std::chrono::milliseconds limit) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
    ctx->deadline() - std::chrono::system_clock::now());
  return std::max(std::chrono::milliseconds{1}, std::min(limit, left));
}


/// Sends `msg` (an offer operation) to the owner of `id`'s shard, on this node or another,
/// and hands the reply to `ok`. While the shard moves (no owner known, or the old owner says
/// it moved), pauses and asks again until `deadline`; the caller sees an error only if the
/// shard found no owner in time.
template <class Reply>
void ask_owner(caf::event_based_actor* self, router& r, clock_type::time_point deadline,
               std::string id, caf::message msg, std::function<void(Reply&)> ok, fail_fn fail) {
  auto again = [=, &r](caf::error why) {
    if (clock_type::now() + reroute_pause >= deadline) {
      fail(why);
      return;
    }
    self->request(r.pauser(), caf::infinite, pause_atom::value).then([=, &r](ok_atom) {
      ask_owner<Reply>(self, r, deadline, id, msg, ok, fail);
    });
  };
  bool remote = false;
  auto target = r.route_for(id, &remote);
  if (!target) {
    again(persistence::make_db_error(persistence::db_errc::moved,
                                     "no node owns the shard of offer " + id + " right now"));
    return;
  }
  auto left = std::chrono::duration_cast<caf::timespan>(deadline - clock_type::now());
  // Another node's gateway may die with the request unanswered (CAF does not fail requests
  // to a lost node): give a remote attempt a slice of the time and route again after it. A
  // request the dead node did carry out may so run twice (at least once, like any retry).
  auto attempt = remote ? std::min(left, std::max(caf::timespan{remote_attempt}, left / 4)) : left;
  self->request(target, std::max(attempt, caf::timespan{1'000'000}), msg)
    .then([=](Reply& reply) { ok(reply); },
          [=](caf::error& err) {
            bool attempt_over = err == caf::sec::request_timeout && clock_type::now() < deadline;
            if (reroutable(err) || attempt_over)
              again(err);
            else
              fail(err);
          });
}

} // namespace gost::runtime
