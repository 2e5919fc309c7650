#pragma once
// The seed's scheduler: the API's side of scheduled actions (ADR 0011). Each change checks the
// request (errc::invalid_argument naming the field: nothing stored), gives the action a new
// guid and adds one row to the incoming queue of a random shard, in one transaction with the
// action; it never deletes queue rows (the shard's worker drops stale ones).
// With shard groups (ADR 0023) an action lives in the database of its id's home shard
// (`shard_of(id)`), and its incoming rows go to random shards of that same group: the action,
// its queue rows and its attempt log stay in one database, and the worker that fires it
// works there. Lists read every group and merge by id.
// Thread-safe (the gRPC service calls it from its threads).

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <caf/expected.hpp>

#include "gost/persistence/scheduled/actions.hpp"
#include "gost/scheduled/rules.hpp"

namespace gost::persistence {
class pg_pool;
class shard_placement;
} // namespace gost::persistence

namespace gost::scheduled {

class scheduler {
public:
  /// Every shard in `pool` (one group).
  scheduler(persistence::pg_pool& pool, uint32_t shard_count, rules_options opts,
            std::function<int64_t()> clock_ms, std::string node = {});
  /// The shards where `where` says they are now (shard groups).
  scheduler(std::shared_ptr<const persistence::shard_placement> where, rules_options opts,
            std::function<int64_t()> clock_ms, std::string node = {});

  /// A new action `id` (errc::already_exists when the id is taken).
  caf::expected<v1::ScheduledAction> create(const std::string& id,
                                            const v1::ScheduledActionSpec& spec);

  /// Many new actions in one transaction, all or none (bulk loads: the benchmark's million).
  /// Each is checked as `create` checks it (the error names `actions[i]` and the field), and
  /// each gets its own guid and an incoming row of a random shard. errc::already_exists
  /// naming a taken id. With several shard groups, one transaction per group: all or none in
  /// each, and an error after some groups' commits says how many actions those stored.
  caf::expected<size_t>
  create_many(const std::vector<std::pair<std::string, v1::ScheduledActionSpec>>& actions);

  /// Replaces the spec of `id` (errc::not_found when there is none): counters kept, the
  /// schedule started over.
  caf::expected<v1::ScheduledAction> update(const std::string& id,
                                            const v1::ScheduledActionSpec& spec);

  /// Deletes `id`; false when there was none.
  caf::expected<bool> remove(const std::string& id);

  /// An operator's verb on `id` (rules.hpp: pause, resume, run_now): a change like any other —
  /// a new guid and an incoming row of a random shard — or nothing written when the action is
  /// so already (`changed` false). errc::not_found when there is none;
  /// errc::failed_precondition for a run-now of a paused action.
  enum class verb : uint8_t { pause, resume, run_now };
  struct verb_result {
    v1::ScheduledAction action;
    bool changed = false;
  };
  caf::expected<verb_result> apply(verb v, const std::string& id, const std::string& who);

  /// The database holding action `id` (its home shard's group): where the API's reads of one
  /// action go (its row, its queue rows, its attempt log).
  persistence::pg_pool& database_of(const std::string& id) const;

  /// Actions by id after `after_id` (exclusive), at most `limit`, read in every group and
  /// merged in id order (byte order: the query's collation is "C" in every database).
  caf::expected<std::vector<v1::ScheduledAction>>
  list(const std::string& after_id, size_t limit, const persistence::scheduled_filter& f) const;

  const rules_options& options() const noexcept { return opts_; }

  /// Told the shard of every incoming row written, after its commit (the node wakes that
  /// shard's worker: its poller here, or the owner through a wake notice). Set before use.
  void on_incoming(std::function<void(uint32_t shard)> f) { incoming_ = std::move(f); }

private:
  /// A random shard of the group holding `id`'s home shard (any shard with one group).
  uint32_t incoming_shard(const std::string& id);

  std::shared_ptr<const persistence::shard_placement> where_;
  uint32_t shard_count_;
  bool one_group_; ///< every shard in one database: any shard will do for an incoming row
  rules_options opts_;
  std::function<int64_t()> clock_ms_;
  std::string node_; ///< named in the attempt log entries a verb writes
  std::function<void(uint32_t)> incoming_;
  void told(uint32_t shard) const {
    if (incoming_)
      incoming_(shard);
  }
  std::mutex mtx_;
  std::minstd_rand rng_;
};

} // namespace gost::scheduled
