// The offer kind on the entity kit: what offers plug into the kit's shard supervisor
// (gost/core/kit/shard.hpp) — their actor, their dead-letter write-set, the lanes (one per
// stage, with the stage's limits) and the background rescan of seed 000 ("Фоновый переобход").
// Everything else a shard does (resident set, passivation, drain, queues, retries) is the
// kit's.

#include <caf/actor_system.hpp>

#include "gost/core/kit/shard.hpp"
#include "gost/core/kit/writer.hpp"
#include "gost/core/log.hpp"
#include "gost/core/shard_hash.hpp"
#include "gost/offers/spawn.hpp"
#include "gost/offers/stage_runner.hpp"
#include "gost/persistence/random_id.hpp"
#include "offer_actor.hpp"

namespace gost {

namespace {

const auto lg = gost::log::get("offers");

} // namespace

namespace detail {

template <class Self>
void rescan_page(Self self, std::string after);

struct offer_kind {
  using ops = offer_ops;
  using actor = offer_actor;
  using shard = shard_actor;
  using write_set = persistence::write_set;
  using env = offer_env;
  static constexpr const char* name = "offer";

  static actor spawn_entity(caf::local_actor* shard, std::string id, caf::intrusive_ptr<env> e) {
    return spawn_offer_actor(shard, std::move(id), std::move(e));
  }

  /// Drops the consumed entry and records the letter, in one write.
  static write_set dead_letter(const std::string& stage_id, const std::string& offer_id,
                               int attempts, const std::string& reason) {
    write_set ws;
    ws.offer_id = offer_id;
    ws.op = persistence::offer_op::none;
    ws.dequeue.push_back(stage_id);
    ws.dead_letters.push_back({stage_id, reason, attempts});
    return ws;
  }

  template <class Self>
  static auto extra_handlers(Self self) {
    return std::make_tuple([=](rescan_atom) { rescan_page(self, std::string{}); });
  }

  template <class Self>
  static void on_start(Self self) {
    auto& env = *self->state.env;
    env.run = std::make_shared<const run_context>(
      run_context{env.node_id, env.shard, env.epoch}); // what stages see
    if (env.rescan_every.count() > 0 && !env.stages->all().empty())
      self->delayed_send(self, env.rescan_every, rescan_atom_v);
  }
};

using offer_shard_ptr = kit::shard_ptr<offer_kind>;

void rescan_done(offer_shard_ptr self) {
  auto& env = *self->state.env;
  lg->info("background rescan done shard={}", env.shard);
  self->delayed_send(self, env.rescan_every, rescan_atom_v);
}

/// One page of the background rescan: ask every stage about each offer (as the seed's
/// "external change" does, but at background priority) and enqueue those that want it. The
/// next page starts when this page's entries are committed, so a rescan never floods the
/// writer.
template <class Self>
void rescan_page(Self self, std::string after) {
  auto& env = *self->state.env;
  self->request(env.store, std::chrono::seconds{60}, scan_atom_v, env.shard, after, env.rescan_page)
    .then(
      [=](offer_snapshots& page) {
        auto& e = *self->state.env;
        if (page.empty()) {
          rescan_done(self);
          return;
        }
        auto now = e.now_us();
        auto last = page.back().offer.id();
        auto full = page.size() >= e.rescan_page;
        std::vector<persistence::write_set> sets;
        for (auto& snap : page) {
          offer_context ctx;
          for (auto& stored : snap.states) {
            auto& held = ctx.states[stored.stage_id];
            held.value.ParseFromString(stored.bytes);
            held.version = stored.version;
          }
          for (auto& q : snap.queued)
            if (q.due_at_us <= now)
              ctx.queued_now.insert(q.lane);
          auto wanted = ask_stages(*e.stages, nullptr, snap.offer, ctx, {}, now,
                                   persistence::priority::background);
          if (wanted.empty())
            continue;
          persistence::write_set ws;
          ws.offer_id = snap.offer.id();
          ws.op = persistence::offer_op::none;
          ws.enqueue = std::move(wanted);
          sets.push_back(std::move(ws));
        }
        auto pending = std::make_shared<size_t>(sets.size());
        auto next = [=] {
          if (full)
            rescan_page(self, last);
          else
            rescan_done(self);
        };
        if (sets.empty()) {
          next();
          return;
        }
        for (auto& ws : sets) {
          auto entries = ws.enqueue;
          self->request(e.writer, caf::infinite, write_atom_v, e.shard, e.epoch, std::move(ws))
            .then(
              [=](persistence::write_outcome out) {
                if (out == persistence::write_outcome::committed)
                  kit::learn(self, entries);
                if (--*pending == 0)
                  next();
              },
              [=](caf::error& err) {
                if (!db_outage_reported(self->state.cfg.db.get(), err))
                  lg->warn("background rescan write failed shard={} error={}",
                           self->state.env->shard, error_message(err));
                if (--*pending == 0)
                  next();
              });
        }
      },
      [=](caf::error& err) {
        if (!db_outage_reported(self->state.cfg.db.get(), err))
          lg->warn("background rescan failed shard={} error={}; retrying later",
                   self->state.env->shard, error_message(err));
        self->delayed_send(self, self->state.env->rescan_every, rescan_atom_v);
      });
}

} // namespace detail

shard_actor spawn_shard(caf::actor_system& sys, shard_options opts) {
  auto env = caf::make_counted<detail::offer_env>();
  env->writer = opts.writer;
  env->store = opts.store;
  env->stages = opts.stages;
  env->pools = opts.pools;
  env->stats = opts.stats;
  env->max_chain = opts.max_chain;
  env->node_id = opts.node_id;
  env->rescan_every = opts.rescan_every;
  env->rescan_page = opts.rescan_page;
  env->limits = opts.limits;
  auto cfg = std::move(opts.kit);
  // One lane per stage, with the stage's limits; entries of a stage no longer registered run
  // with default limits (the offer actor drops them from the queue).
  cfg.lanes = [stages = opts.stages](const std::string& lane) {
    kit::lane_options o;
    if (auto* e = stages->find(lane)) {
      o.max_parallelism = e->opts.max_parallelism;
      o.rate_limit = e->opts.rate_limit;
      o.retry_backoff = e->opts.retry_backoff;
    }
    return o;
  };
  cfg.store = caf::actor_cast<kit::queue_store>(opts.store);
  cfg.has_queues = !opts.stages->all().empty();
  cfg.stats = std::shared_ptr<kit::entity_stats>(opts.stats, &opts.stats->offers);
  cfg.figures = opts.stats->offer_shards.open(cfg.shard);
  cfg.write_slot = opts.stats->offer_writes.slot_for(cfg.shard);
  cfg.trail = &detail::offer_trail;
  return kit::spawn_shard<detail::offer_kind>(sys, std::move(cfg), std::move(env));
}

std::vector<writer_actor>
spawn_offer_writers(caf::actor_system& sys, persistence::pg_pool& pool, size_t n, size_t batch_max,
                    std::chrono::milliseconds flush_delay, std::shared_ptr<node_stats> stats,
                    std::shared_ptr<const dependency_tracker> db, bool history) {
  kit::writer_options<persistence::write_set> o;
  o.pool = &pool;
  o.commit = [history](persistence::pg_pool& p,
                       const std::vector<persistence::fenced_write<persistence::write_set>>& sets) {
    return persistence::commit_write_sets(p, sets, {history});
  };
  o.max_batch = batch_max;
  o.flush_delay = flush_delay;
  o.stats = std::shared_ptr<kit::writer_stats>(stats, &stats->offer_writes);
  o.name = "offer";
  o.db = std::move(db);
  return kit::spawn_writers(sys, n, o);
}

std::shared_ptr<const stage_pools> spawn_stage_pools(caf::actor_system& sys,
                                                     const stage_registry& reg) {
  auto out = std::make_shared<stage_pools>();
  for (auto& e : reg.all()) {
    if (!e.opts.blocking)
      continue;
    pool_options po;
    po.name = "stage." + e.id;
    po.workers = std::max(1, e.opts.pool_workers);
    po.queue_capacity = e.opts.pool_queue;
    po.rate_limit = e.opts.pool_rate_limit;
    out->emplace(e.id, spawn_pool(sys, po));
  }
  return out;
}

std::string make_offer_id() {
  return persistence::random_id();
}

std::string offer_id_for_request(const std::string& seller_id, const std::string& request_id) {
  static const char* hex = "0123456789abcdef";
  std::string out(32, '0');
  uint64_t halves[2] = {offer_hash(seller_id + '\x1f' + request_id),
                        offer_hash(request_id + '\x1f' + seller_id + '\x1f')};
  for (int half = 0; half < 2; ++half) {
    auto bits = halves[half];
    for (int i = 0; i < 16; ++i) {
      out[static_cast<size_t>(half * 16 + i)] = hex[bits & 0xf];
      bits >>= 4;
    }
  }
  return out;
}

} // namespace gost
