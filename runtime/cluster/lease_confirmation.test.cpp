#include <doctest/doctest.h>

#include "cluster/lease_confirmation.hpp"
#include "gost/core/errc.hpp"

using gost::runtime::lease_confirmation;
using namespace std::chrono_literals;

namespace {

const lease_confirmation::clock::time_point t0{std::chrono::hours{1}};

} // namespace

TEST_CASE("lease confirmation: everything confirmed until the cluster manager enables it") {
  lease_confirmation c;
  CHECK(c.confirmed(t0));
  CHECK(c.confirmed(t0 + 24h));
  c.enable("n1", 2000ms, 200ms, t0);
  CHECK_FALSE(c.confirmed(t0)); // no heartbeat yet
}

TEST_CASE("lease confirmation: confirmed from a heartbeat's start for the lease timeout less the "
          "margin") {
  lease_confirmation c;
  c.enable("n1", 2000ms, 200ms, t0);
  auto g = c.generation();
  // The heartbeat started at t0 + 100 ms and answered 700 ms later: what counts is its start.
  CHECK_FALSE(c.confirm(t0 + 100ms, g, t0 + 800ms)); // no unconfirmed spell was reported
  CHECK(c.confirmed(t0 + 800ms));
  CHECK(c.confirmed(t0 + 1899ms));
  CHECK_FALSE(c.confirmed(t0 + 1900ms));
  // A heartbeat that answered only after its own window had passed confirms nothing now.
  c.mark_unconfirmed();
  CHECK_FALSE(c.confirm(t0 + 1000ms, c.generation(), t0 + 2900ms));
  CHECK_FALSE(c.confirmed(t0 + 2900ms));
  // The next one does, and ends the reported spell (the caller logs the way back once).
  CHECK(c.confirm(t0 + 3000ms, c.generation(), t0 + 3100ms));
  CHECK(c.confirmed(t0 + 4799ms));
  CHECK_FALSE(c.confirm(t0 + 3200ms, c.generation(), t0 + 3300ms));
  // An older heartbeat's answer arriving late never shortens the window.
  CHECK_FALSE(c.confirm(t0 + 2500ms, c.generation(), t0 + 3400ms));
  CHECK(c.confirmed(t0 + 4999ms));
}

TEST_CASE("lease confirmation: a lost liveness session unconfirms at once; only a heartbeat "
          "started after the lock is taken again confirms") {
  lease_confirmation c;
  c.enable("n1", 2000ms, 200ms, t0);
  c.confirm(t0, c.generation(), t0 + 10ms);
  auto in_flight = c.generation(); // a heartbeat starts at t0 + 300 ms
  CHECK(c.session_lost(t0 + 400ms));
  CHECK_FALSE(c.session_lost(t0 + 450ms)); // one spell, reported once
  CHECK_FALSE(c.confirmed(t0 + 400ms));    // well inside the heartbeat's window
  CHECK(c.unconfirmed_since() == t0 + 400ms);
  // The heartbeat in flight succeeds: it may have committed before another node took the
  // shards, so it does not count.
  CHECK_FALSE(c.confirm(t0 + 300ms, in_flight, t0 + 500ms));
  CHECK_FALSE(c.confirmed(t0 + 500ms));
  // Nor does one started while the session is down, even if it answers after the lock is back.
  auto while_down = c.generation();
  CHECK_FALSE(c.confirm(t0 + 600ms, while_down, t0 + 650ms));
  c.session_locked();
  CHECK_FALSE(c.confirm(t0 + 600ms, while_down, t0 + 700ms));
  CHECK_FALSE(c.confirmed(t0 + 700ms));
  // One started with the lock held again does.
  CHECK(c.confirm(t0 + 800ms, c.generation(), t0 + 850ms));
  CHECK(c.confirmed(t0 + 850ms));
  CHECK_FALSE(c.confirmed(t0 + 2600ms));
}

TEST_CASE("lease confirmation: a refused call is counted and told UNAVAILABLE, naming the node") {
  lease_confirmation c;
  c.enable("n7", 2000ms, 200ms, t0);
  c.confirm(t0, c.generation(), t0);
  auto err = c.refuse(t0 + 2300ms);
  CHECK(err == gost::errc::unavailable);
  auto msg = gost::error_message(err);
  CHECK_MESSAGE(msg.find("node n7 cannot confirm its shard leases") != std::string::npos, msg);
  CHECK_MESSAGE(msg.find("for 500 ms") != std::string::npos, msg);
  CHECK_MESSAGE(msg.find("retry on another node") != std::string::npos, msg);
  c.refuse(t0 + 2400ms);
  CHECK(c.refusals() == 2);
  CHECK_FALSE(c.mark_unconfirmed()); // the first refusal reported the spell
}

TEST_CASE("lease confirmation: a node alone in the cluster serves on past a late heartbeat; not "
          "alone, it refuses again") {
  lease_confirmation c;
  c.enable("n1", 2000ms, 200ms, t0);
  CHECK(c.confirm(t0, c.generation(), t0 + 10ms) == false);
  CHECK_FALSE(c.confirmed(t0 + 5s)); // the heartbeat is late: refused
  c.set_alone(true);                 // its last look saw no other node: nobody takes its shards
  CHECK(c.alone());
  CHECK(c.confirmed(t0 + 5s));
  CHECK(c.session_lost(t0 + 6s));
  CHECK(c.confirmed(t0 + 6s));
  c.set_alone(false); // a join notice, or a look that saw another node
  CHECK_FALSE(c.confirmed(t0 + 6s));
}
