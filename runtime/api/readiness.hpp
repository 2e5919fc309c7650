#pragma once
// Readiness, apart from liveness: whether a load balancer should send this node calls. The
// node is ready once every part started and every shard has had a route (an owner this node
// serves or forwards to), for as long as its database is reachable, and until its stop began.
// Liveness (`/healthz`: the process answers) is not this.
//
// - Routes are a start gate only: after the first time every shard had a route, a shard
//   moving (a hand-off, a dead node's lease running out) does not make the node unready —
//   its calls pause and re-route, and marking every node unready at each move would take the
//   whole cluster out of a balancer.
// - The database is the node's PostgreSQL tracker (gost/core/dependency.hpp): unready from
//   the first call that could not reach it until the first that did.
//
// Who reads it: `/readyz` (admin HTTP), the `gost_ready` gauge, and a watcher thread (every
// 100 ms) that pushes each change to the gRPC health service (`grpc.health.v1.Health`). Each
// of them evaluates it through `check`, which publishes a change before it answers: whoever
// saw `/readyz` say 200 finds gRPC health SERVING too. Started last in the start order; its
// stop is the first of the node's stops, so at SIGTERM readiness drops before the hand-off
// and the drain. Thread-safe.

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "gost/core/backoff.hpp"

namespace gost {
class dependency_tracker;
}

namespace gost::runtime {

class router;

class readiness {
public:
  /// Called with each change of readiness (and once with the state when watching starts).
  using publish_fn = std::function<void(bool ready, const std::string& reason)>;
  /// The start gate: why not every shard has a route yet, empty once each has
  /// (`routes_gate`).
  using gate_fn = std::function<std::string()>;

  /// `db` may be null (no database to wait for).
  explicit readiness(std::shared_ptr<const dependency_tracker> db);
  ~readiness();
  readiness(const readiness&) = delete;
  readiness& operator=(const readiness&) = delete;

  /// Why the node should not get calls now; empty when it should. A change since the last
  /// check is published (and logged) before this returns.
  std::string check();
  bool ready() { return check().empty(); }

  /// Every part of the node runs: readiness follows the gate (until it passed once) and the
  /// database from now on, checked every `every` by a thread that calls `publish` with each
  /// change.
  void start(gate_fn gate, publish_fn publish, std::chrono::milliseconds every);

  /// The node stops: unready for good, published before this returns; the watcher is gone.
  void stop();

private:
  std::string reason() const;
  void watch(std::chrono::milliseconds every);

  const std::shared_ptr<const dependency_tracker> db_;
  mutable std::mutex mtx_; // guards what the state is made of:
  gate_fn gate_;
  bool started_ = false;
  bool stopping_ = false;
  mutable bool gate_passed_ = false;
  std::mutex publish_mtx_; // taken before mtx_; guards what was published:
  publish_fn publish_;
  int published_ = -1; ///< -1 nothing yet, else the last published readiness
  stop_signal stop_;
  std::thread watcher_;
};

/// The start gate of a node: every shard has a route in `routes` and a heartbeat confirmed
/// the leases of those owned here (held weakly: the node releases its router when it stops;
/// gone, it says "stopping").
readiness::gate_fn routes_gate(std::weak_ptr<const router> routes);

} // namespace gost::runtime
