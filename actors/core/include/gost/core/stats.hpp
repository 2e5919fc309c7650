#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

// -- counters and gauges declared once ----------------------------------------------------------
//
// A stats struct lists its values once, in an X-macro: the member, the Prometheus name (after
// the owner's prefix, e.g. "gost_offer_"), its kind and its help text. The member is a relaxed
// atomic the actors bump; `visit(f)` hands every value to a renderer (Prometheus text, the
// admin API), so nothing the code counts is left out of /metrics (Envoy's ALL_*_STATS idea).
//
// clang-format off
//   #define GOST_EXAMPLE_STATS(X) X(counter, runs, "runs_total", "Runs committed.")
//   struct example_stats { GOST_EXAMPLE_STATS(GOST_STAT_MEMBER) GOST_STATS_VISIT(GOST_EXAMPLE_STATS) };
// clang-format on

namespace gost {

enum class stat_kind : uint8_t { counter, gauge };

/// Counters only grow (unsigned); gauges go up and down.
template <stat_kind K>
struct stat_value {
  using type = uint64_t;
};
template <>
struct stat_value<stat_kind::gauge> {
  using type = int64_t;
};

} // namespace gost

#define GOST_STAT_MEMBER(kind, member, name, help)                                                 \
  std::atomic<::gost::stat_value<::gost::stat_kind::kind>::type> member{0};
#define GOST_STAT_VISIT_ONE(kind, member, name, help)                                              \
  f(::gost::stat_kind::kind, name, help,                                                           \
    static_cast<int64_t>(member.load(std::memory_order_relaxed)));
#define GOST_STAT_VISIT_AS_G(kind, member, name, help)                                             \
  g(::gost::stat_kind::kind, name, help,                                                           \
    static_cast<int64_t>(member.load(std::memory_order_relaxed)));
#define GOST_STATS_VISIT(LIST)                                                                     \
  template <class F>                                                                               \
  void visit(F&& f) const {                                                                        \
    LIST(GOST_STAT_VISIT_ONE)                                                                      \
  }

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
  uint64_t bucket(int i) const noexcept {
    return counts_[static_cast<size_t>(i)].load(std::memory_order_relaxed);
  }
  /// Sum of everything recorded, in microseconds.
  uint64_t sum_us() const noexcept { return sum_us_.load(std::memory_order_relaxed); }

private:
  std::array<std::atomic<uint64_t>, buckets> counts_{};
  std::atomic<uint64_t> sum_us_{0};
};

namespace kit {

#define GOST_ENTITY_STATS(X)                                                                       \
  X(gauge, resident, "actors_resident", "Entity actors in memory.")                                \
  X(counter, spawned, "actors_spawned_total", "Entity actors spawned (activations).")              \
  X(counter, passivated, "actors_passivated_total",                                                \
    "Entity actors stopped after being idle or over the resident cap.")                            \
  X(counter, crashed, "actors_crashed_total",                                                      \
    "Entity actors that stopped without being passivated (an exception, a kill).")                 \
  X(counter, dead_letters, "dead_letters_total",                                                   \
    "Runs given up after their attempts and recorded as dead letters.")                            \
  X(counter, drain_cut, "drain_cut_total",                                                         \
    "Entity actors killed because a shard's drain outlived cluster.drain_timeout.")

/// What the entity kit's shards count for one kind of entity (shared by all shards of a node).
struct entity_stats {
  GOST_ENTITY_STATS(GOST_STAT_MEMBER)
  GOST_STATS_VISIT(GOST_ENTITY_STATS)
};

#define GOST_WRITER_STATS(X)                                                                       \
  X(counter, batches, "write_batches_total", "Write-behind batches committed.")                    \
  X(counter, sets, "write_sets_total", "Write-sets committed (in any outcome).")                   \
  X(counter, failed_batches, "write_batches_failed_total",                                         \
    "Write-behind batches whose transaction failed (nothing committed; the writers reload).")      \
  X(counter, fenced, "write_sets_fenced_total",                                                    \
    "Write-sets refused because their shard's lease moved to another node.")                       \
  X(gauge, pending, "write_sets_pending", "Write-sets waiting in the writers for their batch.")

/// What one write-behind writer shows while it works (the console's write lag and batch size).
struct writer_slot {
  /// When (µs since the Unix epoch) the oldest write-set of the batch it collects or commits
  /// now reached it; 0 while it holds none.
  std::atomic<int64_t> oldest_us{0};
  /// Write-sets in the batch it committed last.
  std::atomic<uint64_t> last_batch{0};
};

/// What the entity kit's writers count for one kind of entity.
struct writer_stats {
  GOST_WRITER_STATS(GOST_STAT_MEMBER)
  GOST_STATS_VISIT(GOST_WRITER_STATS)
  /// How long each batch's transaction took (all writers).
  latency_histogram commit;
  /// One per writer, in the order of spawn_writers (shard s writes through slot s mod n, as
  /// writer_for picks its writer). Added before the writers start; read without locks.
  std::deque<writer_slot> slots;

  /// The slot of the writer of `shard`, or null when no writer was started.
  const writer_slot* slot_for(uint32_t shard) const noexcept {
    return slots.empty() ? nullptr : &slots[shard % slots.size()];
  }
};

#define GOST_SHARD_STATS(X)                                                                        \
  X(gauge, resident, "actors_resident", "Entity actors in memory.")                                \
  X(gauge, mailbox, "mailbox_depth",                                                               \
    "Messages waiting in the mailboxes of the shard's entity actors, as each last counted its "    \
    "own.")                                                                                        \
  X(counter, runs, "runs_total", "Queue entries run and committed.")                               \
  X(counter, failures, "run_failures_total", "Runs that failed (each attempt).")                   \
  X(gauge, running, "runs_in_flight", "Runs started and not finished.")                            \
  X(gauge, backlog, "queue_backlog",                                                               \
    "Due queue entries the shard holds in memory waiting for a slot (at most queue.page; "         \
    "more may wait in PostgreSQL).")                                                               \
  X(gauge, epoch, "lease_epoch", "The shard's lease epoch (every write is fenced with it).")

#define GOST_LANE_STATS(X)                                                                         \
  X(counter, runs, "runs_total", "Queue entries of the lane run and committed.")                   \
  X(counter, failures, "run_failures_total", "Runs of the lane that failed (each attempt).")       \
  X(counter, dead_letters, "dead_letters_total",                                                   \
    "Runs of the lane given up after their attempts and recorded as dead letters.")                \
  X(gauge, running, "runs_in_flight", "Runs of the lane started and not finished.")                \
  X(gauge, backlog, "queue_backlog", "Due queue entries of the lane waiting for a slot.")

/// What one shard keeps per lane (a stage, a task group, an entity kind's lane): the figures of
/// `gostctl top`'s entity kinds and lanes.
struct lane_stats {
  GOST_LANE_STATS(GOST_STAT_MEMBER)
  GOST_STATS_VISIT(GOST_LANE_STATS)
};

/// What one shard counts per durable entity kind of what its actors answered: asks by outcome
/// and the stored events (sent by the API or another entity, or a timer's) their handler
/// refused when they ran. Rendered as gost_entity_asks_total{kind,outcome} and
/// gost_entity_sends_refused_total{kind} (add_entity_kind_metrics).
struct kind_call_stats {
  std::atomic<uint64_t> asks_replied{0}; ///< answered with the handler's reply (or none)
  std::atomic<uint64_t> asks_refused{0}; ///< the handler refused (gost::refused)
  /// Neither: the handler threw, the write failed, the event was not the kind's type.
  std::atomic<uint64_t> asks_failed{0};
  std::atomic<uint64_t> sends_refused{0};
};

/// What one shard supervisor of the entity kit keeps about itself, for the console (`gostctl
/// top`) and Prometheus (label `shard`). Written by the shard and its entity actors with relaxed
/// atomics; read by the console without asking the shard anything.
struct shard_stats {
  GOST_SHARD_STATS(GOST_STAT_MEMBER)
  GOST_STATS_VISIT(GOST_SHARD_STATS)
  /// Due time (µs since the Unix epoch) of the oldest due entry waiting for a slot; 0: none.
  std::atomic<int64_t> oldest_due_us{0};

  /// A lane's figures, made the first time the lane is named (lanes appear at run time: a task
  /// group created after the shard started). The reference stays valid as long as these stats.
  lane_stats& lane(const std::string& id);
  /// Every lane named so far, by name.
  std::vector<std::pair<std::string, const lane_stats*>> lanes() const;
  /// Entity actors of one kind in memory, where kinds share the shard (durable entities: one
  /// supervisor for all the application's types); made on first use, valid as `lane`'s.
  std::atomic<int64_t>& resident_of(const std::string& kind);
  /// Every kind counted so far, by name, with its resident actors.
  std::vector<std::pair<std::string, int64_t>> residents() const;
  /// A kind's asks and refused events; made on first use, valid as `lane`'s.
  kind_call_stats& calls_of(const std::string& kind);
  /// Every kind whose calls were counted so far, by name.
  std::vector<std::pair<std::string, const kind_call_stats*>> kind_calls() const;

private:
  mutable std::mutex named_mtx_; ///< the shard adds, the console reads: rarely contended
  std::map<std::string, std::unique_ptr<lane_stats>> lanes_;
  std::map<std::string, std::unique_ptr<std::atomic<int64_t>>> residents_;
  std::map<std::string, std::unique_ptr<kind_call_stats>> kind_calls_;
};

/// The shard stats of a node's shards of one kind, by shard. A shard's stats live as long as
/// its supervisor holds them; the registry only points at them, so a stopped shard drops out
/// by itself.
class shard_registry {
public:
  /// Fresh stats for a shard about to start (replacing any of an earlier supervisor).
  std::shared_ptr<shard_stats> open(uint32_t shard);
  /// The shards with live stats, in shard order.
  std::vector<std::pair<uint32_t, std::shared_ptr<const shard_stats>>> live() const;

private:
  mutable std::mutex mtx_;
  std::map<uint32_t, std::weak_ptr<shard_stats>> by_shard_;
};

#define GOST_LOADER_STATS(X)                                                                       \
  X(counter, batches, "load_batches_total",                                                        \
    "Group loads of entities being activated (one set of queries for many entities).")             \
  X(counter, loaded, "loads_total", "Entities asked for by group loads.")

/// What the entity kit's loaders count for one kind of entity (load_batch.hpp): loads / batches
/// is the mean group size.
struct loader_stats {
  GOST_LOADER_STATS(GOST_STAT_MEMBER)
  GOST_STATS_VISIT(GOST_LOADER_STATS)
};

} // namespace kit

/// What a node knows about one stage's runs.
struct stage_metrics {
  explicit stage_metrics(std::string stage_id) : id(std::move(stage_id)) {}
  std::string id;
  std::atomic<uint64_t> runs{0};     ///< committed
  std::atomic<uint64_t> failures{0}; ///< process threw (each attempt)
  latency_histogram run;             ///< the shard's dispatch to the commit (load, process, write)
  latency_histogram process;         ///< the stage's own `process` call
  std::atomic<bool> paused{false};   ///< as this node applied the operators' pauses last
};

#define GOST_STAGE_ENGINE_STATS(X)                                                                 \
  X(counter, stage_runs, "stage_runs_committed_total", "Stage runs committed, all stages.")        \
  X(counter, stage_failures, "stage_run_failures_total",                                           \
    "Stage process calls that failed (each attempt), all stages.")                                 \
  X(counter, stage_conflicts, "version_conflicts_total",                                           \
    "Events redone because the offer changed behind the actor (a lost version check).")            \
  X(counter, change_storms_cut, "change_storms_cut_total",                                         \
    "Stages cut for re-triggering more than stage.max_chain times in one chain.")

#define GOST_KAFKA_STATS(X)                                                                        \
  X(counter, outbox_events_published, "outbox_events_published_total",                             \
    "After-save events acknowledged by Kafka (their outbox rows deleted).")                        \
  X(counter, outbox_publish_failures, "outbox_publish_failures_total",                             \
    "Outbox rows whose publishing failed (retried).")                                              \
  X(counter, after_save_calls, "after_save_calls_total",                                           \
    "Stage after_save hook calls that succeeded.")                                                 \
  X(counter, after_save_failures, "after_save_failures_total",                                     \
    "Stage after_save hook calls that failed (retried or skipped).")                               \
  X(counter, after_save_skipped, "after_save_skipped_total",                                       \
    "After-save events a hook gave up on after its retries.")

/// Counters the actors of one node keep up to date and the node exports (Prometheus and the
/// admin API render them through `visit`). Shared by all shards of a node; relaxed atomics,
/// read without stopping anyone.
struct node_stats {
  kit::entity_stats offers;         ///< the offer actors (gost_offer_actors_*)
  kit::writer_stats offer_writes;   ///< the offers' write-behind writers (gost_offer_write_*)
  kit::loader_stats offer_loads;    ///< the offers' group loads (gost_offer_load*)
  kit::shard_registry offer_shards; ///< the offer shards' own figures (gost_offer_shard_*)
  /// The durable entity shards' own figures (all the application's kinds; `gostctl top`).
  kit::shard_registry entity_shards;
  GOST_STAGE_ENGINE_STATS(GOST_STAT_MEMBER)
  GOST_KAFKA_STATS(GOST_STAT_MEMBER)

  /// Every node-level value (not the per-stage ones): f(kind, name, help, value), names
  /// without the "gost_" prefix.
  template <class F>
  void visit(F&& f) const {
    auto prefixed = [&f](const char* prefix) {
      return [&f, prefix](stat_kind k, const char* name, const char* help, int64_t v) {
        f(k, std::string{prefix} + name, help, v);
      };
    };
    offers.visit(prefixed("offer_"));
    offer_writes.visit(prefixed("offer_"));
    offer_loads.visit(prefixed("offer_"));
    {
      auto g = prefixed("offer_");
      GOST_STAGE_ENGINE_STATS(GOST_STAT_VISIT_AS_G)
    }
    {
      auto g = prefixed("");
      GOST_KAFKA_STATS(GOST_STAT_VISIT_AS_G)
    }
  }

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
