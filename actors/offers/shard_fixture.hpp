#pragma once
// Test support for actors/: one shard on a real PostgreSQL database of its own.

#include <functional>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>
#include <doctest/doctest.h>

#include "gost/offers/spawn.hpp"
#include "gost/persistence/offers/write_behind.hpp"
#include "gost/persistence/pg_pool.hpp"
#include "gost/persistence/schema.hpp"
#include "gost/testing/pg.hpp"

namespace gost {

struct shard_fixture {
  testing::temp_db db;
  std::unique_ptr<persistence::pg_pool> pool;
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  store_actor store;
  writer_actor writer;
  shard_actor shard;
  std::shared_ptr<const stage_pools> pools; ///< of the blocking stages
  std::shared_ptr<node_stats> stats = std::make_shared<node_stats>();

  explicit shard_fixture(
    std::chrono::milliseconds idle = std::chrono::seconds{60},
    std::shared_ptr<const stage_registry> stages = std::make_shared<stage_registry>(),
    std::function<void(shard_options&)> tweak = {}) {
    persistence::pg_pool::options o;
    o.dsn = db.dsn();
    o.size = 2;
    pool = std::make_unique<persistence::pg_pool>(o);
    REQUIRE(persistence::migrate(*pool));
    auto epochs = persistence::acquire_all_leases(*pool, "test", 8);
    REQUIRE(epochs);
    register_offer_types(cfg);
    cfg.set("scheduler.max-threads", size_t{2});
    sys = std::make_unique<caf::actor_system>(cfg);
    store = spawn_store(*sys, *pool);
    writer =
      spawn_offer_writers(*sys, *pool, "test", 1, 500, std::chrono::milliseconds{2}, stats).front();
    shard_options so;
    so.kit.shard = 3;
    so.store = store;
    so.writer = writer;
    so.kit.idle_timeout = idle;
    so.kit.epoch = (*epochs)[3];
    so.stages = std::move(stages);
    so.kit.queue_poll = std::chrono::milliseconds{50};
    so.stats = stats;
    for (auto& e : so.stages->all())
      stats->add_stage(e.id);
    pools = spawn_stage_pools(*sys, *so.stages);
    so.pools = pools;
    if (tweak)
      tweak(so);
    shard = spawn_shard(*sys, so);
  }

  ~shard_fixture() {
    caf::anon_send_exit(shard, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(store, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(writer, caf::exit_reason::user_shutdown);
    for (auto& [id, p] : *pools)
      caf::anon_send_exit(p, caf::exit_reason::user_shutdown);
    // The actor system waits for detached actors to be destroyed: drop our handles first.
    shard = shard_actor{};
    store = store_actor{};
    writer = writer_actor{};
    pools.reset();
    sys.reset();
  }

  template <class... Ts>
  caf::expected<offer_msg> ask(Ts&&... xs) {
    caf::scoped_actor self{*sys};
    caf::expected<offer_msg> out{caf::error{}};
    self->request(shard, std::chrono::seconds{10}, std::forward<Ts>(xs)...)
      .receive([&](offer_msg& m) { out = std::move(m); }, [&](caf::error& e) { out = e; });
    return out;
  }
};

/// A minimal valid offer for tests.
inline v1::Offer new_offer(const std::string& id) {
  v1::Offer o;
  o.set_id(id);
  o.set_seller_id("s");
  o.set_title("t");
  return o;
}

} // namespace gost
