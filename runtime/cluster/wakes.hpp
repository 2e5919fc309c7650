#pragma once
// Wake notices (persistence::wake_channel): work written for a shard behind its owner's back
// reaches the owner at once, instead of at its next safety poll. The writers are few: an
// operator's requeue or a scheduled action's on a node that does not own the offer's shard,
// an event an entity sends to an entity of another node's shard, an action created for a shard
// another node's scheduled worker runs.
//
// - wake(part, shard): the part's supervisor of the shard on this node is told directly; for a
//   shard another node owns (or none yet), a NOTIFY goes out from the hub's own thread (never
//   blocking the caller; notices queued meanwhile go in one statement).
// - heard(payload): a notice from the listener (persistence::cluster_listener, on its thread):
//   a shard kind's local supervisor is told with `enqueued` and no entries (it polls from the
//   start now, kit/shard.hpp); a node part registered with add_part (`scheduled`) gets the
//   shard. A notice for a shard this node does not own is ignored: its owner heard it too.

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gost::persistence {
class pg_pool;
}

namespace gost::runtime {

class router;

class wake_hub {
public:
  wake_hub(persistence::pg_pool& pool, std::weak_ptr<const router> routes);
  ~wake_hub(); ///< stop()
  wake_hub(const wake_hub&) = delete;
  wake_hub& operator=(const wake_hub&) = delete;

  /// Work was written for `shard` of `part` (a shard kind's name, or a part's of add_part).
  void wake(const std::string& part, uint32_t shard);

  /// The same for several shards: a part of add_part is told once if any of them is this
  /// node's; the others' owners get their notices in one statement.
  void wake(const std::string& part, const std::vector<uint32_t>& shards);

  /// A notice's payload, as the listener heard it.
  void heard(const std::string& payload);

  /// A node part that takes notices for its shards (on the listener's thread: must not block).
  void add_part(const std::string& part, std::function<void(uint32_t shard)> on_wake);

  /// Sends what is queued and stops the thread (before the pool goes); later wakes are
  /// delivered locally only.
  void stop();

  /// Notices sent (NOTIFY) and heard, for tests and the logs.
  uint64_t sent() const;
  uint64_t heard_count() const;

private:
  /// Tells this node's supervisor or part; false when the shard is not this node's.
  bool deliver(const std::string& part, uint32_t shard);
  void run();

  persistence::pg_pool& pool_;
  std::weak_ptr<const router> routes_;
  mutable std::mutex mtx_;
  std::condition_variable cv_;
  std::vector<std::string> queued_;
  std::map<std::string, std::function<void(uint32_t)>> parts_;
  bool stopping_ = false;
  uint64_t sent_ = 0;
  uint64_t heard_ = 0;
  std::thread thread_;
};

} // namespace gost::runtime
