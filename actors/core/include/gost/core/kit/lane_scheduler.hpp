#pragma once
// The entity kit's in-memory view of a shard's durable queues: the entries due soon, per lane
// (a stage for offers, a task group for tasks), with the limits that keep one lane from
// delaying another. Plain class (no actors), driven by the kit's shard and unit-tested
// directly.

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <queue>
#include <set>
#include <string>
#include <vector>

#include "gost/core/kit/trail.hpp"
#include "gost/persistence/queue.hpp"

namespace gost::kit {

/// How much of a lane may run at once, and how its failures are retried.
struct lane_options {
  /// At most this many entities of the lane in work at once (per shard).
  int max_parallelism = 64;
  /// At most this many starts per second (per shard); 0: unlimited.
  double rate_limit = 0;
  /// The wait before a failed run is retried (see retry_policy).
  std::chrono::milliseconds retry_backoff{1000};
};

class lane_scheduler {
public:
  struct work {
    std::string lane;
    std::string entity_id;
    event_source source = event_source::queue; ///< how the entry came (the actor's trail)
  };

  /// The options of a lane, asked once, the first time the lane is seen (lanes may appear at
  /// run time: a task group created after the shard started).
  using options_fn = std::function<lane_options(const std::string& lane)>;

  lane_scheduler(options_fn limits, int background_share);

  /// Adds entries (from PostgreSQL or from a commit) unless already known. Returns how many
  /// were new. Each remembers its source: background ones `rescan`, ones due after `now_us`
  /// `timer`, the others `origin`.
  size_t add(const persistence::queue_entries& entries, event_source origin = event_source::queue,
             int64_t now_us = std::numeric_limits<int64_t>::max());

  /// Work that may start now: due, within each lane's max parallelism and rate limit, with
  /// background work taking one turn in `background_share` when normal work waits. Marks each
  /// returned item in flight.
  std::vector<work> take(int64_t now_us);

  /// A run ended (committed or given up): frees its slot and forgets the entry.
  void done(const std::string& lane, const std::string& entity_id);
  /// A run failed: frees its slot and puts the entry back, due at `retry_at_us`.
  void retry(const std::string& lane, const std::string& entity_id, int64_t retry_at_us);

  /// Entities with an entry due in (now_us, horizon_us]: activate them now so their work
  /// starts on time (each entry is returned once).
  std::vector<std::string> take_warm(int64_t now_us, int64_t horizon_us);

  /// The earliest due time of a waiting entry, or INT64_MAX.
  int64_t next_due() const;
  /// The earliest due time of an entry not yet returned by take_warm, or INT64_MAX.
  int64_t next_warm_due() const;
  /// A lane's options (asked of options_fn the first time).
  const lane_options& options(const std::string& lane) { return lane_of(lane).options; }
  size_t known() const { return known_.size(); }
  size_t in_flight(const std::string& lane) const;
  size_t waiting(const std::string& lane) const;

  /// f(lane, waiting) for every lane seen: its due entries waiting for a slot.
  template <class F>
  void each_lane(F&& f) const {
    for (auto& l : lanes_)
      f(l.id, l.normal.size() + l.background.size());
  }

  /// Due entries waiting for a slot, all lanes (as of the last `take`).
  size_t waiting() const;
  /// The due time of the oldest of them, or 0 when none waits.
  int64_t oldest_waiting() const;

  /// The lanes whose work does not start (an operator paused them); replaces the last set.
  /// Their entries stay known and start once the lane is no longer paused.
  void set_paused(std::set<std::string> lanes) { paused_ = std::move(lanes); }
  /// Runs of paused lanes still in flight.
  size_t paused_in_flight() const;

private:
  struct ready_entry {
    int64_t due_us;
    std::string entity_id;
    event_source source;
  };
  struct lane_queue {
    std::string id;
    lane_options options;
    /// Due entries in the order they came due.
    std::deque<ready_entry> normal;
    std::deque<ready_entry> background;
    size_t in_flight = 0;
    double tokens = 0;
    int64_t refilled_us = 0;
    uint64_t picks = 0;
  };
  struct timer {
    int64_t due_us;
    std::string lane;
    std::string entity_id;
    persistence::priority prio;
    event_source source;
    bool operator>(const timer& o) const { return due_us > o.due_us; }
  };

  void make_ready(int64_t now_us);
  lane_queue* find_lane(const std::string& id);
  lane_queue& lane_of(const std::string& id);

  options_fn options_;
  std::deque<lane_queue> lanes_; ///< few (stages, groups): found by a scan; stable addresses
  int background_share_;
  std::priority_queue<timer, std::vector<timer>, std::greater<timer>> timers_;
  using warm_entry = std::pair<int64_t, std::string>; ///< (due, entity)
  std::priority_queue<warm_entry, std::vector<warm_entry>, std::greater<warm_entry>> warm_;
  std::set<std::pair<std::string, std::string>> known_;
  std::set<std::string> paused_;
};

} // namespace gost::kit
