#pragma once
// Sending an operation of any kind (cluster/kinds.hpp) to whoever owns its entity's shard, on
// this node or another, and riding out a shard move. Runs inside a call-hub actor
// (gost/core/call_hub.hpp); the request is typed against the kind's interface, so a wrong
// argument list does not compile. Names no kind: the built-in kinds' shorthands
// (`ask_owner`, `ask_entity_owner`) are in cluster/builtin_kinds.hpp.

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <tuple>

#include <caf/event_based_actor.hpp>

#include "cluster/router.hpp"
#include "gost/core/call_hub.hpp"
#include "gost/core/errc.hpp"
#include "gost/core/routing.hpp"

namespace gost::runtime {

using fail_fn = std::function<void(const caf::error&)>;

using clock_type = std::chrono::steady_clock;

/// The least time a request forwarded to another node gets before it is routed again.
constexpr auto remote_attempt = std::chrono::milliseconds{2000};

namespace detail {

/// A write forwarded to another node gets a request id (unless the client gave one): the
/// owner applies it once, so sending it again after a timeout is answered, never redone. A
/// kind's request id type has its `give_request_id(T&)` next to it, found by its namespace
/// (cluster/builtin_kinds.hpp for offers' and entities'); other arguments get none.
template <class T>
void give_request_id(T&) {}

template <class T>
void give_request_id_to(T& x) {
  give_request_id(x);
}

/// One attempt of ask_routed: `args` is the operation, built once and shared by every attempt
/// (a retry sends it again from here instead of carrying copies in its closures). `sent`: an
/// earlier attempt reached an owner and got no answer in time, so the owner may have carried the
/// operation out (an attempt refused by a definite answer — moved, fenced, the owner's lease
/// unconfirmed — was not carried out and does not count).
template <class Ops, class Route, class Ok, class... Ts>
void ask_routed_attempt(caf::event_based_actor* self, Route route, clock_type::time_point deadline,
                        Ok ok, fail_fn fail, std::shared_ptr<std::tuple<Ts...>> args,
                        bool sent = false) {
  const auto& id =
    std::apply([](const auto&... ys) -> const std::string& { return entity_id_of(ys...); }, *args);
  bool remote = false;
  caf::error refused; // this node owns the shard but cannot confirm its lease now
  Ops target = route(id, &remote, &refused);
  if (remote) // kept in `args`: an attempt after this one sends the same request id
    std::apply([](auto&... ys) { (give_request_id_to(ys), ...); }, *args);
  // `reached`: this attempt or an earlier one reached an owner and its outcome is unknown.
  auto again = [=](caf::error why, bool reached) {
    if (clock_type::now() + call_hub::pause >= deadline) {
      // Refused (here, or moved) after an owner may have carried it out: the outcome is
      // unknown (a timeout), never "safe to retry".
      fail(reached && (why == errc::unavailable || why == errc::moved)
             ? caf::make_error(caf::sec::request_timeout)
             : why);
      return;
    }
    call_hub::later(self, [=](caf::event_based_actor* s) {
      ask_routed_attempt<Ops>(s, route, deadline, ok, fail, args, reached);
    });
  };
  if (refused) {
    // Nothing carried out anywhere yet: refused at once, safe to retry on another node. After
    // an attempt that reached another node (its answer late), asked again until the lease is
    // confirmed or the deadline: the request id makes the owner answer its first answer.
    if (sent)
      again(refused, true);
    else
      fail(refused);
    return;
  }
  if (!target && remote) { // a kind the node link does not carry (cluster/kinds.hpp)
    fail(make_error(errc::failed_precondition,
                    "another node owns the shard of " + id
                      + " and its kind is not forwarded between nodes; call that node"));
    return;
  }
  if (!target) {
    again(make_error(errc::moved, "no node owns the shard of " + id + " right now"), sent);
    return;
  }
  auto left = std::chrono::duration_cast<caf::timespan>(deadline - clock_type::now());
  // Another node may die with the request unanswered: give a remote attempt a slice of the
  // time and route again after it. A write sent again carries the same request id, so an owner
  // that did carry it out answers the first answer instead of doing it twice.
  auto attempt = remote ? std::min(left, std::max(caf::timespan{remote_attempt}, left / 4)) : left;
  // The message gets its own copy of the operation: `args` stays for a retry.
  auto handle = std::apply(
    [&](const auto&... ys) {
      return self->request(target, std::max(attempt, caf::timespan{1'000'000}), ys...);
    },
    *args);
  handle.then(on_reply<Ops, Ts...>(std::move(ok)), [deadline, sent, again = std::move(again),
                                                    fail = std::move(fail)](caf::error& err) {
    bool attempt_over = err == caf::sec::request_timeout && clock_type::now() < deadline;
    // An owner that cannot confirm its lease refused this attempt, but an earlier one may have
    // been carried out: not "safe to retry" (asked again, as above).
    bool refused_after_sent = sent && err == errc::unavailable;
    if (gost::classify(err) == disposition::reroute || attempt_over || refused_after_sent)
      again(err, sent || attempt_over);
    else
      fail(err);
  });
}

} // namespace detail

/// Sends the operation `xs...` (it names its entity first) to the owner of the entity's shard
/// as `route(id, &remote, &refused)` finds it (an `Ops` handle, on this node or another), and
/// hands the reply to `ok(reply&...)`. While the shard moves (no owner known, or the old owner
/// says it moved), parks in the hub and asks again until `deadline`; the caller sees an error
/// only if the shard found no owner in time. A route that sets `refused` (this node owns the
/// shard but cannot confirm its lease) fails the call with that error at once.
template <class Ops, class Route, class Ok, class... Ts>
void ask_routed(caf::event_based_actor* self, Route route, clock_type::time_point deadline, Ok ok,
                fail_fn fail, Ts... xs) {
  detail::ask_routed_attempt<Ops>(self, std::move(route), deadline, std::move(ok), std::move(fail),
                                  std::make_shared<std::tuple<Ts...>>(std::move(xs)...));
}

/// ask_routed for an operation of kind `k`: to the owner of its entity's shard.
template <class Ops, class Local, class Ok, class... Ts>
void ask_kind(caf::event_based_actor* self, router& r, kind_slot<Ops, Local> k,
              clock_type::time_point deadline, Ok ok, fail_fn fail, Ts... xs) {
  ask_routed<Ops>(
    self,
    [&r, k](const std::string& id, bool* remote, caf::error* refused) {
      return r.route(k, id, remote, refused);
    },
    deadline, std::move(ok), std::move(fail), std::move(xs)...);
}

/// How long a call may take: the server's limit (`api.request_timeout`), or less when the
/// client's deadline comes earlier (gRPC deadlines are wall-clock times).
inline std::chrono::milliseconds call_budget(std::chrono::system_clock::time_point client_deadline,
                                             std::chrono::milliseconds limit) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
    client_deadline - std::chrono::system_clock::now());
  return std::max(std::chrono::milliseconds{1}, std::min(limit, left));
}

} // namespace gost::runtime
