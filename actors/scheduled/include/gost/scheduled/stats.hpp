#pragma once
// What the scheduled actions' workers of a node count (gost_scheduled_* on /metrics, registered
// by start_scheduled.cpp). Written by the workers on their own threads with relaxed atomics;
// read by the renderer without asking them.

#include <memory>

#include "gost/core/stats.hpp"
#include "gost/core/stats_registry.hpp"

// clang-format off
#define GOST_SCHEDULED_STATS(X)                                                                    \
  X(counter, fired, "attempts_succeeded_total", "Attempts of scheduled actions that succeeded.")   \
  X(counter, failed, "attempts_failed_total",                                                      \
    "Attempts of scheduled actions that failed (retried, or the occurrence given up).")            \
  X(counter, recounted, "attempts_interrupted_total",                                              \
    "Attempts found begun and never finished (a crash, a lost lease) and counted as failed.")      \
  X(counter, moved, "actions_moved_total",                                                         \
    "Incoming rows (new or changed actions) moved into their shard's schedule.")                  \
  X(counter, dropped, "actions_dropped_total",                                                     \
    "Stale rows the workers deleted (superseded by a newer change of their action).")              \
  X(counter, step_failures, "worker_step_failures_total",                                          \
    "Worker steps that failed (the database; retried every scheduled.poll).")                    \
  X(gauge, workers, "workers", "Workers running on this node (one per shard it holds).")
// clang-format on

namespace gost::scheduled {

struct scheduled_stats {
  GOST_SCHEDULED_STATS(GOST_STAT_MEMBER)
  GOST_STATS_VISIT(GOST_SCHEDULED_STATS)
  /// From an occurrence's time to the start of its first attempt (RunNow's excluded): how late
  /// the workers fire.
  latency_histogram lag;
};

/// Registers GOST_SCHEDULED_STATS as gost_scheduled_* and gost_scheduled_fire_lag_seconds.
inline void add_scheduled_metrics(stats_registry& reg,
                                  const std::shared_ptr<const scheduled_stats>& stats) {
  reg.add_stats("gost_scheduled_", stats);
  reg.add_histogram("gost_scheduled_fire_lag_seconds",
                    "From an occurrence's scheduled time to the start of its first attempt.",
                    member_of(stats, stats->lag));
}

} // namespace gost::scheduled
