#pragma once
// The `video.check` stage's figures on /metrics (registered by gostd where it registers the
// stage: runtime/node/start_stages.cpp): checks by result and reason class, the HTTP requests'
// latency by method, and the re-checks scheduled sooner with back-off. Written by the stage's
// pool threads; read by the node's registry without stopping them. docs/video-check.md lists
// the series.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "gost/core/stats.hpp"
#include "gost/core/stats_registry.hpp"

namespace gost::videos {

// The node-wide counters (after "gost_video_", no label).
#define GOST_VIDEO_STATS(X)                                                                        \
  X(counter, backoff_scheduled, "rechecks_backoff_total",                                          \
    "Checks that ended in a passing error (5xx, 429, timeout, no connection, a malformed "         \
    "answer) and were scheduled again sooner, with back-off (stages.video.retry .. retry_max).")

struct video_stats {
  GOST_VIDEO_STATS(GOST_STAT_MEMBER)
  GOST_STATS_VISIT(GOST_VIDEO_STATS)
  latency_histogram head; ///< HEAD requests, connection included
  latency_histogram get;  ///< ranged GETs

  /// One check that ended with `result` (available, unavailable, unknown) for a reason of
  /// class `reason` (video_rules::reason_class).
  void checked(const std::string& result, const std::string& reason) {
    std::lock_guard<std::mutex> g{mtx_};
    ++checks_[{result, reason}];
  }
  /// (result, reason class) → checks.
  std::map<std::pair<std::string, std::string>, uint64_t> checks() const {
    std::lock_guard<std::mutex> g{mtx_};
    return checks_;
  }

private:
  mutable std::mutex mtx_;
  std::map<std::pair<std::string, std::string>, uint64_t> checks_;
};

/// Registers gost_video_checks_total (labels `result`, `reason`), gost_video_http_seconds
/// (histogram, label `method`: HEAD, GET) and GOST_VIDEO_STATS.
void add_video_metrics(stats_registry& reg, std::shared_ptr<const video_stats> stats);

} // namespace gost::videos
