#pragma once
// Live traces (issue 13 item 5; docs/adr/0013-recent-events-and-live-trace.md): the server side
// of AdminService.Trace (a client's trace, on any node) and NodeService.Trace (another node's
// trace of an offer this node owns).
//
// Each trace is one gRPC server-streaming reactor with a thread of its own that waits on a
// subscription of the node's trace hub (kit/trail.hpp) while the offer's shard is here, and
// otherwise reads a NodeService.Trace stream from the shard's owner (found in PostgreSQL's
// leases, reached over the node link's credentials). When the owner changes (hand-off,
// failover) the serving node finds the new one and goes on, writing an event of kind "owner".
// A trace ends at its count, at its time, when the client goes away (OnCancel) or when the
// node stops; then it unsubscribes, so a forgotten trace costs nothing. A node serves at most
// `limits.traces_max` at once.

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include <grpcpp/support/server_callback.h>

#include "cluster/node_link.hpp"
#include "gost/core/kit/trail.hpp"
#include "gost/v1/admin.pb.h"

namespace gost::persistence {
class pg_pool;
}

namespace gost::runtime {

class router;
class trace_reactor;

/// What serves the traces of a node; shared by the reactors, which may outlive a service.
struct trace_context {
  std::shared_ptr<kit::trace_hub> hub;
  /// Weakly: the routing table's stop releases the actor handles it holds.
  std::weak_ptr<router> routes;
  std::string node_id;
  persistence::pg_pool* pool = nullptr; ///< where the owners of shards are read
  std::chrono::milliseconds lease_timeout{};
  link_security security;
  int link_max_bytes = 4 << 20;
  uint32_t traces_max = 16;

  /// Ends every trace (node stopping): each finishes within a tick.
  void stop();
  bool stopping() const { return stopping_.load(); }

private:
  friend class trace_reactor;
  std::atomic<bool> stopping_{false};
  std::mutex mtx_;
  std::set<trace_reactor*> live_;
};

/// Starts a trace of `req` (its bounds checked by the caller: `events`, `ms`). `follow`: the
/// client's trace (an offer's followed to whichever node owns it); else a node link's (this
/// node's events of the offer while it owns the shard). Returns the reactor (or an error one
/// when `traces_max` are running).
grpc::ServerWriteReactor<v1::TraceEvent>* start_trace(std::shared_ptr<trace_context> ctx,
                                                      const v1::TraceRequest& req, bool follow,
                                                      uint32_t events, int64_t ms);

} // namespace gost::runtime
