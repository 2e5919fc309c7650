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

/// One walk over a shard's offers: the periodic rescan (every stage, again and again) or a
/// sweep (one stage, once, its progress recorded under its token).
struct rescan_pass {
  std::shared_ptr<const stage_registry> stages; ///< the stages asked about each offer
  std::string token;                            ///< empty: the periodic rescan
  size_t sweep = 0;                             ///< a sweep's index in offer_env::sweeps
  int64_t enqueued = 0;                         ///< a sweep's offers enqueued so far
  uint64_t pages = 0;
};

template <class Self>
void rescan_page(Self self, rescan_pass pass, std::string after);

template <class Self>
void start_sweep(Self self, size_t index);

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
    return std::make_tuple(
      [=](rescan_atom) { rescan_page(self, rescan_pass{self->state.env->stages}, std::string{}); },
      [=](rescan_atom, uint32_t sweep) { start_sweep(self, sweep); });
  }

  template <class Self>
  static void on_start(Self self) {
    auto& env = *self->state.env;
    env.run = std::make_shared<const run_context>(
      run_context{env.node_id, env.shard, env.epoch}); // what stages see
    if (env.rescan_every.count() > 0 && !env.stages->all().empty())
      self->delayed_send(self, env.rescan_every, rescan_atom_v);
    if (!env.sweeps.empty())
      start_sweep(self, 0);
  }
};

using offer_shard_ptr = kit::shard_ptr<offer_kind>;

/// A failed sweep step is tried again after this (from its recorded progress).
constexpr auto sweep_retry = std::chrono::seconds{5};

/// The end of a pass over the shard (its last page committed): the periodic rescan waits for its
/// next turn, a sweep records that it is done and the next sweep starts.
void pass_done(offer_shard_ptr self, const rescan_pass& pass, const std::string& last) {
  auto& env = *self->state.env;
  if (pass.token.empty()) {
    lg->info("background rescan done shard={}", env.shard);
    self->delayed_send(self, env.rescan_every, rescan_atom_v);
    return;
  }
  self->send(env.store, update_atom_v, scan_atom_v, pass.token, env.shard, last, pass.enqueued,
             true);
  lg->info("sweep done token={} stage={} shard={} enqueued={} pages={}", pass.token,
           env.sweeps[pass.sweep].stage_id, env.shard, pass.enqueued, pass.pages);
  start_sweep(self, pass.sweep + 1);
}

/// Sweep `index` of the shard's sweeps, from where its recorded progress says (or the next one
/// when it is done, or none when there is no such sweep).
template <class Self>
void start_sweep(Self self, size_t index) {
  auto& env = *self->state.env;
  if (index >= env.sweeps.size())
    return;
  auto& sw = env.sweeps[index];
  auto* entry = env.stages->find(sw.stage_id);
  if (entry == nullptr) {
    lg->warn("sweep skipped token={} shard={}: stage {} is not registered on this node", sw.token,
             env.shard, sw.stage_id);
    start_sweep(self, index + 1);
    return;
  }
  auto only = std::make_shared<stage_registry>();
  only->add(entry->id, entry->impl, entry->opts);
  self->request(env.store, std::chrono::seconds{60}, load_atom_v, scan_atom_v, sw.token, env.shard)
    .then(
      [=](std::string& after, int64_t enqueued, bool done) {
        auto& e = *self->state.env;
        if (done) {
          lg->debug("sweep already done token={} shard={}", e.sweeps[index].token, e.shard);
          start_sweep(self, index + 1);
          return;
        }
        lg->info("sweep started token={} stage={} shard={} after={} enqueued={}",
                 e.sweeps[index].token, e.sweeps[index].stage_id, e.shard, after, enqueued);
        rescan_pass pass{only, e.sweeps[index].token, index, enqueued};
        rescan_page(self, std::move(pass), std::move(after));
      },
      [=](caf::error& err) {
        if (!db_outage_reported(self->state.cfg.db.get(), err))
          lg->warn("sweep progress not read token={} shard={} error={}; retrying",
                   self->state.env->sweeps[index].token, self->state.env->shard,
                   error_message(err));
        self->delayed_send(self, sweep_retry, rescan_atom_v, static_cast<uint32_t>(index));
      });
}

/// One page of a pass: ask the pass's stages about each offer (as the seed's "external change"
/// does, but at background priority) and enqueue those that want it. The next page starts when
/// this page's entries are committed, so a pass never floods the writer.
template <class Self>
void rescan_page(Self self, rescan_pass pass, std::string after) {
  auto& env = *self->state.env;
  self->request(env.store, std::chrono::seconds{60}, scan_atom_v, env.shard, after, env.rescan_page)
    .then(
      [=](offer_snapshots& page) mutable {
        auto& e = *self->state.env;
        if (page.empty()) {
          pass_done(self, pass, after);
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
          auto wanted = ask_stages(*pass.stages, nullptr, snap.offer, ctx, {}, now,
                                   persistence::priority::background);
          if (wanted.empty())
            continue;
          persistence::write_set ws;
          ws.offer_id = snap.offer.id();
          ws.op = persistence::offer_op::none;
          ws.enqueue = std::move(wanted);
          sets.push_back(std::move(ws));
        }
        ++pass.pages;
        pass.enqueued += static_cast<int64_t>(sets.size());
        auto pending = std::make_shared<size_t>(sets.size());
        auto next = [=] {
          if (!pass.token.empty()) {
            auto& now_env = *self->state.env;
            self->send(now_env.store, update_atom_v, scan_atom_v, pass.token, now_env.shard, last,
                       pass.enqueued, false);
            if (pass.pages % 20 == 0)
              lg->info("sweep progress token={} shard={} pages={} enqueued={} after={}", pass.token,
                       now_env.shard, pass.pages, pass.enqueued, last);
          }
          if (full)
            rescan_page(self, pass, last);
          else
            pass_done(self, pass, last);
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
        auto& e = *self->state.env;
        if (!db_outage_reported(self->state.cfg.db.get(), err))
          lg->warn("background rescan failed shard={} token={} error={}; retrying later", e.shard,
                   pass.token, error_message(err));
        if (pass.token.empty())
          self->delayed_send(self, e.rescan_every, rescan_atom_v);
        else // from the recorded progress
          self->delayed_send(self, sweep_retry, rescan_atom_v, static_cast<uint32_t>(pass.sweep));
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
  env->sweeps = std::move(opts.sweeps);
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

std::vector<writer_actor> spawn_offer_writers(caf::actor_system& sys, persistence::pg_pool& pool,
                                              const std::string& owner, size_t n, size_t batch_max,
                                              std::chrono::milliseconds flush_delay,
                                              std::shared_ptr<node_stats> stats,
                                              std::shared_ptr<const dependency_tracker> db,
                                              bool history, uint32_t shard_count) {
  kit::writer_options<persistence::write_set> o;
  o.pool = &pool;
  persistence::commit_options co;
  co.history = history;
  if (shard_count > 0)
    co.home_shard = [shard_count](const std::string& seller) {
      return shard_of(seller, shard_count);
    };
  o.commit = [co,
              owner](persistence::pg_pool& p,
                     const std::vector<persistence::fenced_write<persistence::write_set>>& sets) {
    return persistence::commit_write_sets(p, sets, owner, co);
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
