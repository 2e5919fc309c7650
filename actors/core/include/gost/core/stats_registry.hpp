#pragma once
// The node's one registry of what it counts, rendered as /metrics. Every part of the node
// registers its figures when it starts (runtime/node/start_*.cpp): X-macro stats (stats.hpp)
// with a metric prefix and constant labels, or a collector for label sets that change at run
// time (the shards of a node, the kinds and lanes of its entities, the image functions' error
// kinds). Rendering asks every collector for its samples, groups them by family and writes each
// family's HELP and TYPE once, so parts that share a family (an X-macro registered once per
// image function) still make valid Prometheus text.
//
// Owner: the node (node_context), for its whole life. Registration and rendering may run on
// different threads (the admin HTTP endpoint serves /metrics while later parts start); a mutex
// orders them. Collectors only read relaxed atomics and take the short locks of the figures
// they visit.

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gost/core/stats.hpp"

namespace gost {

/// Labels of a series, in order: (name, value). Values are escaped when rendered.
using metric_labels = std::vector<std::pair<std::string, std::string>>;

enum class metric_type : uint8_t { counter, gauge, histogram };

/// Samples grouped by family, in the order each family was first named; its text is the
/// Prometheus exposition format with each family's HELP and TYPE once.
class metric_families {
public:
  /// Where samples go instead of the text: a reader of the values themselves (the web
  /// console's sample ring, runtime/console/series.hpp). Counters and gauges only: histograms
  /// are not passed on.
  using sample_sink =
    std::function<void(std::string_view name, const metric_labels& labels, double value)>;

  metric_families() = default;
  explicit metric_families(sample_sink sink) : sink_(std::move(sink)) {}

  /// A family with no sample yet still gets its HELP and TYPE (a stage family on a node
  /// without stages).
  void declare(std::string_view name, metric_type type, std::string_view help);
  /// One sample of a counter or gauge. A sample whose family was declared with another type is
  /// dropped (the first registration wins), as Prometheus would refuse the text otherwise.
  void add(std::string_view name, metric_type type, std::string_view help,
           const metric_labels& labels, double value);
  void add(std::string_view name, stat_kind kind, std::string_view help,
           const metric_labels& labels, int64_t value);
  /// One series of a histogram: every 8th bucket of `h` (powers of two from 2 µs), in seconds.
  void add(std::string_view name, std::string_view help, const metric_labels& labels,
           const latency_histogram& h);

  std::string text() const;
  size_t size() const noexcept { return families_.size(); }

private:
  struct family {
    std::string name;
    metric_type type;
    std::string help;
    std::string samples;
  };
  family* of(std::string_view name, metric_type type, std::string_view help);

  std::vector<family> families_;
  std::map<std::string, size_t, std::less<>> index_;
  sample_sink sink_;
};

class stats_registry {
public:
  using collector = std::function<void(metric_families&)>;

  /// A collector, called at every rendering (label sets that change at run time).
  void add(collector c);

  /// Every value of X-macro stats (their `visit`), named `prefix` + its name, with `labels`.
  /// The registry keeps `stats` alive.
  template <class Stats>
  void add_stats(std::string prefix, std::shared_ptr<const Stats> stats,
                 metric_labels labels = {}) {
    add([prefix = std::move(prefix), stats = std::move(stats),
         labels = std::move(labels)](metric_families& out) {
      stats->visit([&](stat_kind kind, const auto& name, const char* help, int64_t v) {
        out.add(prefix + name, kind, help, labels, v);
      });
    });
  }

  /// One histogram series, named `name`, with `labels`; the registry keeps `h` alive.
  void add_histogram(std::string name, std::string help, std::shared_ptr<const latency_histogram> h,
                     metric_labels labels = {});

  /// Every collector's samples.
  void collect(metric_families& out) const;
  /// The Prometheus text of everything registered.
  std::string prometheus_text() const;

private:
  mutable std::mutex mtx_;
  std::vector<collector> collectors_;
};

/// The samples of figures owned by another object (a member of the node's stats): a pointer
/// sharing the owner's life.
template <class Owner, class Member>
std::shared_ptr<const Member> member_of(const std::shared_ptr<Owner>& owner, const Member& m) {
  return std::shared_ptr<const Member>(owner, &m);
}

namespace kit {

/// The shards' own figures (GOST_SHARD_STATS), one series per live shard (label `shard`),
/// named `prefix` + name, and `prefix` + "oldest_due_age_seconds".
void add_shard_metrics(stats_registry& reg, std::string prefix,
                       std::shared_ptr<const shard_registry> shards);

/// The write-behind writers' figures beyond their X-macro counters: `prefix` +
/// "write_lag_seconds" and "write_last_batch_size" per writer (label `writer`), and
/// "write_commit_seconds" (histogram, all writers).
void add_writer_metrics(stats_registry& reg, std::string prefix,
                        std::shared_ptr<const writer_stats> writes);

/// The durable entity kinds' figures summed over the node's entity shards: per kind (label
/// `kind`) `prefix` + "kind_" + the lane figures (GOST_LANE_STATS) and "kind_actors_resident",
/// `prefix` + "asks_total" (label `outcome`: reply, refused, error) and "sends_refused_total"
/// (kind_call_stats); per lane (labels `kind`, `lane`; "" is the default lane) `prefix` +
/// "lane_" + the lane figures. The kit names a durable entity's lane `kind/lane`. `kinds`
/// lists the kinds to show even before a shard counted anything.
void add_entity_kind_metrics(stats_registry& reg, std::string prefix,
                             std::shared_ptr<const shard_registry> shards,
                             std::vector<std::string> kinds);

} // namespace kit

/// The stages' figures (label `stage`): gost_stage_runs_total, gost_stage_failures_total,
/// gost_stage_paused, gost_stage_run_seconds, gost_stage_process_seconds.
void add_stage_metrics(stats_registry& reg, std::shared_ptr<const node_stats> stats);

} // namespace gost
