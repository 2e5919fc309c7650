// The write-behind writer of one shard: a detached actor (it blocks on PostgreSQL) that
// group-commits write-sets. A write-set waits at most `flush_delay` for others to join its
// batch; a full batch commits at once. While a batch commits, new write-sets queue up in the
// mailbox and form the next batch, so the batch size follows the load by itself.
//
// Memory is bounded by the callers: every producer awaits its outcome (an offer actor has at
// most one write in flight, a shard at most max_parallelism runs per stage), so the buffer
// never holds more than the number of concurrently active offers of the shard.

#include "writer_actor.hpp"

#include <caf/actor_system.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include "gost/persistence/pg_pool.hpp"

namespace gost::detail {

namespace {

using writer_impl = writer_actor::extend<caf::reacts_to<flush_atom>>;

struct writer_state {
  static inline const char* name = "gost.writer";
  writer_args args;
  std::vector<persistence::write_set> batch;
  std::vector<caf::typed_response_promise<persistence::write_outcome>> waiting;
  bool flush_scheduled = false;
};

using self_ptr = writer_impl::stateful_pointer<writer_state>;

void flush(self_ptr self) {
  auto& st = self->state;
  if (st.batch.empty())
    return;
  auto t0 = std::chrono::steady_clock::now();
  auto r = persistence::commit_write_sets(*st.args.pool, st.args.shard, st.args.epoch, st.batch);
  spdlog::debug("write-behind commit shard={} batch={} ms={:.2f}", st.args.shard, st.batch.size(),
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  if (r) {
    for (size_t i = 0; i < st.waiting.size(); ++i)
      st.waiting[i].deliver((*r)[i]);
    if (st.args.stats)
      st.args.stats->write_batches.fetch_add(1, std::memory_order_relaxed);
  } else {
    // Nothing committed: every writer of the batch reloads and redoes, or reports upwards.
    spdlog::warn("write-behind batch failed shard={} size={} error={}", st.args.shard,
                 st.batch.size(), persistence::error_message(r.error()));
    for (auto& rp : st.waiting)
      rp.deliver(r.error());
  }
  st.batch.clear();
  st.waiting.clear();
}

writer_impl::behavior_type writer_fun(self_ptr self, writer_args args) {
  self->state.args = std::move(args);
  return {
    [=](write_atom, persistence::write_set& ws) -> caf::result<persistence::write_outcome> {
      auto& st = self->state;
      auto rp = self->make_response_promise<persistence::write_outcome>();
      st.batch.push_back(std::move(ws));
      st.waiting.push_back(rp);
      if (st.batch.size() >= st.args.max_batch) {
        flush(self);
      } else if (!st.flush_scheduled) {
        st.flush_scheduled = true;
        self->delayed_send(self, st.args.flush_delay, flush_atom_v);
      }
      return rp;
    },
    [=](flush_atom) {
      self->state.flush_scheduled = false;
      flush(self);
    },
  };
}

} // namespace

writer_actor spawn_writer(caf::local_actor* parent, writer_args args) {
  return caf::actor_cast<writer_actor>(parent->spawn<caf::detached + caf::linked>(writer_fun, std::move(args)));
}

} // namespace gost::detail
