#pragma once
// Housekeeping: the node forgets, now and then, what it no longer needs to remember —
// the request ids of writes older than `api.request_ttl` (offers' ids of the shards this
// node owns; durable entities' ids) and the offers' history older than `history.retention`
// (of the shards this node owns). A retry older than that is applied as a new write
// (docs/api.md, Retries). With the feed processor it also cleans old feed loads (seed 004
// "Чистка старых данных", option 2): rows first, in the seed's order, then the files no load
// refers to any more.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>

namespace gost {
class blob_store;
class dependency_tracker;
} // namespace gost

namespace gost::feeds {
struct feed_stats;
}

namespace gost::persistence {
class pg_pool;
class shard_placement;
} // namespace gost::persistence

namespace gost::runtime {

struct housekeeping_options {
  std::chrono::milliseconds request_ttl{24 * 3'600'000};
  /// The offers' history is kept this long (history.retention); 0: off, what is kept goes.
  std::chrono::milliseconds history_retention{0};
  /// How often it looks; default: a tenth of the ttl, at most every 10 minutes.
  std::chrono::milliseconds every{0};
  bool entities = false; ///< durable entity types are registered (their table exists)
  bool images = false;   ///< the image functions run here: their expired results are reaped
  /// The feed processor runs here (feed.enabled): the loads queued in feed_old_loads are
  /// cleaned, `feed_cleanup_batch` per transaction, up to 10 per round; their files go from
  /// `blobs` after each commit. Any node may clean any load (rows taken are skipped by others).
  bool feeds = false;
  int feed_cleanup_batch = 100;
  /// Whether a feed file this database's cleanup released is still referred to elsewhere
  /// (another shard group's loads): then it stays; an error undoes the cleanup step, tried
  /// again next round. Empty: nowhere else.
  std::function<caf::expected<bool>(const std::string&)> feed_file_elsewhere;
  const blob_store* blobs = nullptr;
  feeds::feed_stats* feed_stats = nullptr; ///< may be null
  persistence::pg_pool* pool = nullptr;
  /// The node's PostgreSQL tracker: a round failed by an outage it reported is not logged
  /// again. May be null.
  std::shared_ptr<const dependency_tracker> db;
  /// The shards this node owns now (the router's view).
  std::function<std::vector<uint32_t>()> local_shards;
};

/// `feed_file_elsewhere` for the housekeeper of group `group`: asks every other group's
/// database of `where` whether a load refers to the file (an error when one cannot say).
std::function<caf::expected<bool>(const std::string&)>
feed_files_of_other_groups(std::shared_ptr<const persistence::shard_placement> where,
                           uint32_t group);

/// A detached actor (it blocks on PostgreSQL); the first round runs one interval after start.
caf::actor spawn_housekeeping(caf::actor_system& sys, housekeeping_options opts);

} // namespace gost::runtime
