#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>

namespace gost {

/// A lock-free latency histogram: 8 buckets per power of two (within 10%), from 1 µs to
/// about 18 hours. Cumulative since start, like a Prometheus histogram.
class latency_histogram {
public:
  static constexpr int per_octave = 8;
  static constexpr int octaves = 36;
  static constexpr int buckets = per_octave * octaves;

  void record(std::chrono::microseconds d) noexcept;
  uint64_t count() const noexcept;
  /// The latency below which a fraction `p` of the recorded ones fall (a bucket's upper
  /// bound), in milliseconds; 0 when nothing was recorded.
  double percentile_ms(double p) const noexcept;
  /// Upper bound of bucket `i` in microseconds.
  static double upper_us(int i) noexcept;
  uint64_t bucket(int i) const noexcept { return counts_[static_cast<size_t>(i)].load(std::memory_order_relaxed); }
  /// Sum of everything recorded, in microseconds.
  uint64_t sum_us() const noexcept { return sum_us_.load(std::memory_order_relaxed); }

private:
  std::array<std::atomic<uint64_t>, buckets> counts_{};
  std::atomic<uint64_t> sum_us_{0};
};

/// What a node knows about one stage's runs.
struct stage_metrics {
  explicit stage_metrics(std::string stage_id) : id(std::move(stage_id)) {}
  std::string id;
  std::atomic<uint64_t> runs{0};     ///< committed
  std::atomic<uint64_t> failures{0}; ///< process threw (each attempt)
  latency_histogram run;     ///< the shard's dispatch to the commit (load, process, write)
  latency_histogram process; ///< the stage's own `process` call
};

/// Counters the actors of one node keep up to date and the node exports (Prometheus). Shared
/// by all shards of a node; relaxed atomics, read without stopping anyone.
struct node_stats {
  std::atomic<int64_t> resident_offer_actors{0};
  std::atomic<uint64_t> offer_actors_spawned{0};
  std::atomic<uint64_t> offer_actors_passivated{0};
  std::atomic<uint64_t> offer_actors_crashed{0};
  std::atomic<uint64_t> write_batches{0};
  std::atomic<uint64_t> stage_runs{0};
  std::atomic<uint64_t> stage_failures{0};
  std::atomic<uint64_t> stage_conflicts{0};
  std::atomic<uint64_t> change_storms_cut{0};
  std::atomic<uint64_t> dead_letters{0};
  std::atomic<uint64_t> outbox_events_published{0}; ///< acknowledged by Kafka, rows deleted
  std::atomic<uint64_t> outbox_publish_failures{0}; ///< rows whose events failed (retried)
  std::atomic<uint64_t> after_save_calls{0};    ///< after_save hooks that returned
  std::atomic<uint64_t> after_save_failures{0}; ///< hook calls that threw (retried or skipped)
  std::atomic<uint64_t> after_save_skipped{0};  ///< events a hook gave up on

  /// Adds a stage's figures. Call for every stage before the shards start: the set is read
  /// without locks afterwards.
  void add_stage(std::string id) { stages.emplace_back(std::move(id)); }
  /// The figures of a stage, or null for a stage not added (an unknown stage's entries).
  stage_metrics* stage(std::string_view id) noexcept {
    for (auto& s : stages)
      if (s.id == id)
        return &s;
    return nullptr;
  }
  std::deque<stage_metrics> stages; ///< stable addresses
};

} // namespace gost
