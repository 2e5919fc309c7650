#pragma once
// The entity kit's write-behind writer: a detached actor (it blocks on PostgreSQL) that
// group-commits the write-sets of one kind of entity. A node runs a few of them, matched to
// its database connections (not one per shard: 64 writers waiting for 4 connections only
// queue up in the pool), and shard s writes through writer s mod n, so one shard's writes stay
// in order. A batch mixes shards; the commit fences each write-set by its own shard's epoch.
//
// A write-set waits at most `flush_delay` for others to join its batch; a full batch commits at
// once. While a batch commits, new write-sets queue up in the mailbox and form the next batch,
// so the batch size follows the load by itself. Memory is bounded by the callers: every
// producer awaits its outcome (an entity actor has at most one write in flight, a shard at most
// its lanes' parallelism of runs), so a writer never holds more than the number of busy
// entities of its shards.

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "gost/core/errc.hpp"
#include "gost/core/kit/protocol.hpp"
#include "gost/core/protocol.hpp"
#include "gost/core/stats.hpp"
#include "gost/persistence/writes.hpp"

namespace gost {
class dependency_tracker;
}

namespace gost::persistence {
class pg_pool;
}

namespace gost::kit {

/// The wall clock: microseconds since the Unix epoch (the time of queue entries).
int64_t now_us();

template <class WriteSet>
struct writer_options {
  /// Commits a batch in one transaction; the outcomes in the order of the batch.
  using commit_fn = std::function<caf::expected<std::vector<persistence::write_outcome>>(
    persistence::pg_pool&, const std::vector<persistence::fenced_write<WriteSet>>&)>;
  persistence::pg_pool* pool = nullptr;
  commit_fn commit;
  size_t max_batch = 500;
  std::chrono::milliseconds flush_delay{2};
  std::shared_ptr<writer_stats> stats = std::make_shared<writer_stats>();
  const char* name = "gost.writer"; ///< in logs
  /// The node's PostgreSQL tracker: a batch failed by an outage it reported is not logged
  /// again. Null: every failed batch is logged.
  std::shared_ptr<const dependency_tracker> db;
};

namespace detail {

template <class WriteSet>
struct writer_state {
  static inline const char* name = "gost.writer";
  writer_options<WriteSet> opts;
  std::vector<persistence::fenced_write<WriteSet>> batch;
  std::vector<caf::typed_response_promise<persistence::write_outcome>> waiting;
  bool flush_scheduled = false;
  writer_slot* slot = nullptr; ///< in opts.stats->slots: this writer's lag and batch size
};

template <class WriteSet>
using writer_impl = typename writer_actor<WriteSet>::template extend<caf::reacts_to<flush_atom>>;

template <class WriteSet>
using writer_ptr =
  typename writer_impl<WriteSet>::template stateful_pointer<writer_state<WriteSet>>;

/// Logs a failed batch, unless `db` reported its outage (in writer.cpp: keeps spdlog out of
/// this header).
void log_failed_batch(const char* writer, size_t size, const caf::error& err,
                      const dependency_tracker* db);

template <class WriteSet>
void flush(writer_ptr<WriteSet> self) {
  auto& st = self->state;
  if (st.batch.empty())
    return;
  auto& stats = *st.opts.stats;
  auto n = static_cast<int64_t>(st.batch.size());
  auto t0 = std::chrono::steady_clock::now();
  auto r = st.opts.commit(*st.opts.pool, st.batch);
  stats.commit.record(
    std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0));
  stats.pending.fetch_sub(n, std::memory_order_relaxed);
  st.slot->last_batch.store(static_cast<uint64_t>(n), std::memory_order_relaxed);
  st.slot->oldest_us.store(0, std::memory_order_relaxed);
  if (r) {
    for (size_t i = 0; i < st.waiting.size(); ++i) {
      if ((*r)[i] == persistence::write_outcome::fenced)
        stats.fenced.fetch_add(1, std::memory_order_relaxed);
      st.waiting[i].deliver((*r)[i]);
    }
    stats.batches.fetch_add(1, std::memory_order_relaxed);
    stats.sets.fetch_add(n, std::memory_order_relaxed);
  } else {
    // Nothing committed: every writer of the batch reloads and redoes, or reports upwards.
    stats.failed_batches.fetch_add(1, std::memory_order_relaxed);
    log_failed_batch(st.opts.name, st.batch.size(), r.error(), st.opts.db.get());
    for (auto& rp : st.waiting)
      rp.deliver(r.error());
  }
  st.batch.clear();
  st.waiting.clear();
}

template <class WriteSet>
typename writer_impl<WriteSet>::behavior_type
writer_fun(writer_ptr<WriteSet> self, writer_options<WriteSet> opts, writer_slot* slot) {
  self->state.opts = std::move(opts);
  self->state.slot = slot;
  return {
    [=](write_atom, uint32_t shard, int64_t epoch,
        WriteSet& ws) -> caf::result<persistence::write_outcome> {
      auto& st = self->state;
      auto rp = self->template make_response_promise<persistence::write_outcome>();
      if (st.batch.empty())
        st.slot->oldest_us.store(now_us(), std::memory_order_relaxed);
      st.batch.push_back({shard, epoch, std::move(ws)});
      st.waiting.push_back(rp);
      st.opts.stats->pending.fetch_add(1, std::memory_order_relaxed);
      if (st.batch.size() >= st.opts.max_batch) {
        flush<WriteSet>(self);
      } else if (!st.flush_scheduled) {
        st.flush_scheduled = true;
        self->delayed_send(self, st.opts.flush_delay, flush_atom_v);
      }
      return rp;
    },
    [=](flush_atom) {
      self->state.flush_scheduled = false;
      flush<WriteSet>(self);
    },
  };
}

} // namespace detail

/// Spawns `n` writers (detached: each blocks on its own connection while it commits). Stop
/// them after the shards that use them.
template <class WriteSet>
std::vector<writer_actor<WriteSet>> spawn_writers(caf::actor_system& sys, size_t n,
                                                  const writer_options<WriteSet>& opts) {
  std::vector<writer_actor<WriteSet>> out;
  for (size_t i = 0; i < std::max<size_t>(1, n); ++i) {
    auto* slot = &opts.stats->slots.emplace_back();
    out.push_back(caf::actor_cast<writer_actor<WriteSet>>(
      sys.spawn<caf::detached>(detail::writer_fun<WriteSet>, opts, slot)));
  }
  return out;
}

} // namespace gost::kit
