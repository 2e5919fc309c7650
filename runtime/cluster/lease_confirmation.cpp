#include "cluster/lease_confirmation.hpp"

#include <algorithm>

#include "gost/core/errc.hpp"
#include "gost/core/log.hpp"

namespace gost::runtime {

namespace {

const auto lg = gost::log::get("cluster");

} // namespace

void lease_confirmation::enable(std::string node_id, std::chrono::milliseconds lease_timeout,
                                std::chrono::milliseconds margin, clock::time_point now) {
  std::lock_guard<std::mutex> guard{mtx_};
  node_id_ = std::move(node_id);
  validity_ = std::max(clock::duration::zero(), clock::duration{lease_timeout - margin});
  until_.store(now.time_since_epoch().count(), std::memory_order_release);
  enabled_.store(true, std::memory_order_release);
}

uint64_t lease_confirmation::generation() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return generation_;
}

bool lease_confirmation::confirm(clock::time_point started, uint64_t generation,
                                 clock::time_point now) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (generation != generation_ || !session_up_)
    return false;
  auto until = (started + validity_).time_since_epoch().count();
  if (until > until_.load(std::memory_order_relaxed))
    until_.store(until, std::memory_order_release);
  if (now.time_since_epoch().count() >= until_.load(std::memory_order_relaxed))
    return false; // confirmed only for a time already past: still unconfirmed
  return down_.exchange(false, std::memory_order_acq_rel);
}

bool lease_confirmation::session_lost(clock::time_point now) {
  std::lock_guard<std::mutex> guard{mtx_};
  ++generation_;
  session_up_ = false;
  until_.store(std::min(until_.load(std::memory_order_relaxed), now.time_since_epoch().count()),
               std::memory_order_release);
  return mark_unconfirmed();
}

void lease_confirmation::session_locked() {
  std::lock_guard<std::mutex> guard{mtx_};
  ++generation_;
  session_up_ = true;
}

caf::error lease_confirmation::refuse(clock::time_point now) {
  refusals_.fetch_add(1, std::memory_order_relaxed);
  auto since = std::chrono::duration_cast<std::chrono::milliseconds>(now - unconfirmed_since());
  if (mark_unconfirmed())
    lg->warn("shard leases unconfirmed node={} since_ms={}; calls for its shards are refused "
             "(UNAVAILABLE) until a heartbeat renews them",
             node_id_, since.count());
  return make_error(errc::unavailable, "node " + node_id_
                                         + " cannot confirm its shard leases (database unreachable "
                                           "for "
                                         + std::to_string(since.count())
                                         + " ms: no heartbeat renewed them, or its liveness "
                                           "session is lost); retry on another node");
}

} // namespace gost::runtime
