// The durable entity kind: its traits for the kit's shard, its writers, and the spawn of a
// shard hosting every registered type.

#include <caf/actor_system.hpp>

#include "durable.hpp"
#include "gost/core/kit/writer.hpp"

namespace gost {

namespace detail {

namespace {

using persistence::entity_write;

struct durable_kind {
  using ops = entity_ops;
  using actor = durable_actor;
  using shard = entity_shard_actor;
  using write_set = entity_write;
  using env = entity_env;
  static constexpr const char* name = "entity";

  static actor spawn_entity(caf::local_actor* shard, std::string key, caf::intrusive_ptr<env> e) {
    return spawn_entity_actor(shard, std::move(key), std::move(e));
  }

  /// The kit gave up on an entity (its runs kept failing for reasons not its own events'):
  /// nothing to move, its events stay pending; the entry is found again by a poll.
  static write_set dead_letter(const std::string&, const std::string& key, int,
                               const std::string&) {
    write_set ws;
    ws.kind = kind_of(key);
    ws.entity_id = id_of(key);
    return ws;
  }

  template <class Self>
  static auto extra_handlers(Self) {
    return std::make_tuple();
  }

  template <class Self>
  static void on_start(Self) {}
};

} // namespace

} // namespace detail

std::vector<entity_writer_actor>
spawn_entity_writers(caf::actor_system& sys, persistence::pg_pool& pool, const std::string& owner,
                     size_t n, size_t batch_max, std::chrono::milliseconds flush_delay,
                     std::shared_ptr<kit::writer_stats> stats,
                     std::shared_ptr<const dependency_tracker> db) {
  kit::writer_options<persistence::entity_write> o;
  o.pool = &pool;
  o.commit = [owner](persistence::pg_pool& p,
                     const std::vector<persistence::fenced_write<persistence::entity_write>>& ws) {
    return persistence::commit_entity_writes(p, ws, owner);
  };
  o.max_batch = batch_max;
  o.flush_delay = flush_delay;
  o.stats = std::move(stats);
  o.name = "entity";
  o.db = std::move(db);
  return kit::spawn_writers(sys, n, o);
}

entity_shard_actor spawn_entity_shard(caf::actor_system& sys, entity_shard_options opts) {
  auto env = caf::make_counted<detail::entity_env>();
  env->writer = opts.writer;
  env->store = opts.store;
  env->types = opts.types;
  env->shard_count = opts.shard_count;
  env->notify = std::move(opts.notify);
  env->elsewhere = std::move(opts.elsewhere);
  env->forwarded = std::move(opts.forwarded);
  auto cfg = std::move(opts.kit);
  cfg.lanes = [types = opts.types](const std::string& lane) {
    kit::lane_options o;
    if (auto* t = types->find(detail::kind_of(lane))) {
      auto eo = t->options();
      o.max_parallelism = eo.max_parallelism;
      o.rate_limit = eo.rate_limit;
      o.retry_backoff = eo.retry_backoff;
    }
    return o;
  };
  cfg.store = caf::actor_cast<kit::queue_store>(opts.store);
  cfg.has_queues = !opts.types->empty();
  cfg.queue_prefetch = std::chrono::milliseconds{0}; // runs load anyway
  cfg.trail = &detail::entity_trail;
  return kit::spawn_shard<detail::durable_kind>(sys, std::move(cfg), std::move(env));
}

} // namespace gost
