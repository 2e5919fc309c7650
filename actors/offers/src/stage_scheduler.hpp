#pragma once
// The shard's in-memory view of its stage queues: entries due soon, per stage, with the
// limits that keep one stage from delaying another. Plain class (no actors), driven by the
// shard actor and unit-tested directly.

#include <cstdint>
#include <deque>
#include <map>
#include <queue>
#include <set>
#include <string>
#include <vector>

#include "gost/offers/stage.hpp"
#include "gost/persistence/offers/write_behind.hpp"

namespace gost {

class stage_scheduler {
public:
  struct work {
    std::string stage_id;
    std::string offer_id;
  };

  stage_scheduler(const stage_registry& reg, int background_share);

  /// Adds entries (from PostgreSQL or from a commit) unless already known. Returns how many
  /// were new.
  size_t add(const std::vector<persistence::queue_entry>& entries);

  /// Work that may start now: due, within each stage's max parallelism and rate limit, with
  /// background work taking one turn in `background_share` when normal work waits. Marks each
  /// returned item in flight.
  std::vector<work> take(int64_t now_us);

  /// A run ended (committed or given up): frees its slot and forgets the entry.
  void done(const std::string& stage_id, const std::string& offer_id);
  /// A run failed: frees its slot and puts the entry back, due at `retry_at_us`.
  void retry(const std::string& stage_id, const std::string& offer_id, int64_t retry_at_us);

  /// Offers with an entry due in (now_us, horizon_us]: activate them now so their stage runs
  /// on time (each entry is returned once).
  std::vector<std::string> take_warm(int64_t now_us, int64_t horizon_us);

  /// The earliest due time of a waiting timer, or INT64_MAX.
  int64_t next_due() const;
  /// The earliest due time of an entry not yet returned by take_warm, or INT64_MAX.
  int64_t next_warm_due() const;
  size_t known() const { return known_.size(); }
  size_t in_flight(const std::string& stage_id) const;
  size_t waiting(const std::string& stage_id) const;

private:
  struct lane {
    const stage_registry::entry* stage = nullptr;
    std::deque<std::string> normal;
    std::deque<std::string> background;
    size_t in_flight = 0;
    double tokens = 0;
    int64_t refilled_us = 0;
    uint64_t picks = 0;
  };
  struct timer {
    int64_t due_us;
    std::string stage_id;
    std::string offer_id;
    persistence::priority prio;
    bool operator>(const timer& o) const { return due_us > o.due_us; }
  };

  void make_ready(int64_t now_us);
  lane* find_lane(const std::string& stage_id);

  std::vector<lane> lanes_;
  std::deque<stage_registry::entry> orphans_; ///< stable addresses for lanes of unknown stages
  int background_share_;
  std::priority_queue<timer, std::vector<timer>, std::greater<timer>> timers_;
  using warm_entry = std::pair<int64_t, std::string>; ///< (due, offer)
  std::priority_queue<warm_entry, std::vector<warm_entry>, std::greater<warm_entry>> warm_;
  std::set<std::pair<std::string, std::string>> known_;
};

} // namespace gost
