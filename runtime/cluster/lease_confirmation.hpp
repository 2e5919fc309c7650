#pragma once
// Whether this node may serve its shards now (plain class, unit-tested; issue 27): a node
// serves a shard (reads and writes, local calls and calls forwarded by other nodes) only while
// its leases are confirmed. Another node takes them when their heartbeat is older than
// `cluster.lease_timeout` by PostgreSQL's clock, or at once when this node's liveness session
// ends (its lock goes with it: persistence/cluster/leases.hpp). So they are confirmed until
// the START of the last successful heartbeat (the server stamps it later, never earlier) plus
// the lease timeout minus a margin (one heartbeat interval: clock rates, the taker's commit),
// and unconfirmed at once when the liveness session is lost; a heartbeat that was in flight
// when the session was lost or taken again does not count (the session's generation).
//
// The cluster manager writes it (after each heartbeat; the listener's thread on a session's
// loss or lock); the router reads it on every call it routes here: one atomic load and the
// steady clock, no lock. Disabled (everything confirmed) until the manager joins.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include <caf/error.hpp>

namespace gost::runtime {

class lease_confirmation {
public:
  using clock = std::chrono::steady_clock;

  /// Turns the check on (the cluster manager, at its join): unconfirmed until the first
  /// heartbeat. `margin`: how much sooner than the lease timeout a confirmation lapses.
  void enable(std::string node_id, std::chrono::milliseconds lease_timeout,
              std::chrono::milliseconds margin, clock::time_point now);

  bool enabled() const noexcept { return enabled_.load(std::memory_order_acquire); }

  /// The liveness session's generation: read before a heartbeat starts, handed to confirm.
  uint64_t generation() const;

  /// A heartbeat that started at `started`, with the session at `generation`, renewed the
  /// leases: confirmed until `started` + lease timeout - margin (never earlier than already
  /// confirmed). Nothing when the session was lost or taken again since `generation`, or is
  /// lost now. True when this ends an unconfirmed spell that was reported (mark_unconfirmed):
  /// the caller logs the way back once.
  bool confirm(clock::time_point started, uint64_t generation, clock::time_point now);

  /// The liveness session ended: unconfirmed at once, until a heartbeat that starts after the
  /// lock is taken again. True when this starts an unconfirmed spell (log it once).
  bool session_lost(clock::time_point now);

  /// Whether this node is alone in the cluster: its last look saw no other live node and no
  /// lease owned elsewhere (the cluster manager, after each heartbeat), so nobody can have
  /// taken its shards; false at once when a notice says another node joined or changed
  /// something (the listener's thread). While alone, the leases count as confirmed: a lone
  /// node under a load that delays its heartbeats keeps serving instead of refusing every call
  /// (the cost: a node joining takes expired leases at once, and reads here may be stale until
  /// its join notice arrives, a few milliseconds).
  void set_alone(bool alone) noexcept { alone_.store(alone, std::memory_order_release); }
  bool alone() const noexcept { return alone_.load(std::memory_order_acquire); }

  /// The liveness lock was taken (again): heartbeats started before do not count.
  void session_locked();

  /// Whether the node's leases are confirmed at `now` (always while disabled). The hot path.
  bool confirmed(clock::time_point now) const noexcept {
    if (!enabled_.load(std::memory_order_acquire) || alone_.load(std::memory_order_acquire))
      return true;
    return now.time_since_epoch().count() < until_.load(std::memory_order_acquire);
  }

  /// When the confirmation lapsed (or the session was lost); meaningful while unconfirmed.
  clock::time_point unconfirmed_since() const noexcept {
    return clock::time_point{clock::duration{until_.load(std::memory_order_acquire)}};
  }

  /// Notes that the node is unconfirmed at `now`; true the first time of a spell (the caller
  /// logs the transition once).
  bool mark_unconfirmed() noexcept { return !down_.exchange(true, std::memory_order_acq_rel); }

  /// A call refused because the leases are unconfirmed at `now`: counted, and the error to
  /// answer (errc::unavailable, naming the node and since when). Logs the transition once.
  caf::error refuse(clock::time_point now);

  /// Calls refused so far (gost_lease_unconfirmed_refusals_total).
  uint64_t refusals() const noexcept { return refusals_.load(std::memory_order_relaxed); }

  const std::string& node_id() const noexcept { return node_id_; }

private:
  std::atomic<bool> enabled_{false};
  std::atomic<bool> alone_{false}; ///< set_alone
  /// Confirmed until this steady-clock time (nanoseconds since its epoch): the hot path's read.
  std::atomic<clock::rep> until_{0};
  std::atomic<bool> down_{false}; ///< an unconfirmed spell was reported
  std::atomic<uint64_t> refusals_{0};
  mutable std::mutex mtx_; ///< the writers (manager, listener thread)
  uint64_t generation_ = 0;
  bool session_up_ = true; ///< false from a session's loss until its lock is taken again
  std::string node_id_;
  clock::duration validity_{};
};

} // namespace gost::runtime
