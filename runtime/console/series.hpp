#pragma once
// The web console's time series (docs/console.md "The web page", /api/series): a ring of
// samples the node keeps of its own figures, so the page can plot the last minutes without any
// outside service. Every `console.sample_interval` the node's sampler (start_http.cpp) reads
// the stats registry (gost/core/stats_registry.hpp, what /metrics renders) and the ring turns
// the counters into rates and keeps, per stage and per kind of work, runs/s, failures/s,
// backlog and write lag; the oldest sample goes once `console.sample_count` are kept.
//
// Owner: the node (node_context::series), for its whole life. The sampler writes, the admin
// HTTP threads read (json()): a mutex orders them.

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace gost {
class stats_registry;
}

namespace gost::runtime {

/// What a series shows: two rates (from counters) and two gauges.
enum class series_field : uint8_t { runs, failures, backlog, write_lag };

/// Samples of the metric `metric` feed `field` of the series (`group`, key). The key is the
/// value of the label `key_label`; with no label, `key`; with neither, every series of `group`
/// that this sample has (a figure its members share, as the entity writers' lag). Samples
/// with the same key are summed, except write lag: the largest. `scale` multiplies the value
/// (seconds to ms). A negative backlog ("not counted yet") is left out.
struct series_rule {
  std::string metric;
  std::string group;
  std::string key_label;
  std::string key;
  series_field field = series_field::runs;
  double scale = 1;
};

/// The console's rules: groups `stage` (per stage), `offers`, `kind` (durable entity types,
/// tasks among them as `task.<type>`), `scheduled`, `image` (per function) and `feed`, from
/// the families the node registers (docs/console.md lists them).
std::vector<series_rule> console_series_rules();

class series_ring {
public:
  /// Keeps the last `capacity` samples (at least 2); `interval_ms` is only reported.
  series_ring(size_t capacity, int64_t interval_ms, std::vector<series_rule> rules);

  /// Reads every figure of `reg` that a rule names, as of `at_us` (µs since the epoch), and
  /// keeps one sample. A rate needs the series' previous sample: the first is null. A counter
  /// that went down (its shard moved away, the part restarted) counts from zero again. A
  /// sample not later than the last one is ignored.
  void sample(const stats_registry& reg, int64_t at_us);

  /// `{"interval_ms","capacity","at_us":[...],"series":[{"group","key","runs_per_s":[...],
  /// "failures_per_s":[...],"backlog":[...],"write_lag_ms":[...]}]}`, oldest first, aligned
  /// with `at_us`; null where a series had no value (not yet seen, or no such figure).
  std::string json() const;

  size_t size() const;

private:
  static constexpr size_t fields = 4;
  struct figures {
    double value[fields] = {};
    bool has[fields] = {};
  };
  struct series {
    std::deque<figures> points; ///< aligned with at_us_; `has` false: null
    figures last_raw;           ///< the counters at the previous sample
    bool seen_last = false;     ///< present in the previous sample
  };
  using series_id = std::pair<std::string, std::string>; // group, key

  size_t capacity_;
  int64_t interval_ms_;
  std::map<std::string, std::vector<series_rule>, std::less<>> rules_;
  mutable std::mutex mtx_;
  std::deque<int64_t> at_us_;
  std::map<series_id, series> series_;
};

} // namespace gost::runtime
