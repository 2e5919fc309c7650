// gost_bench evolve --dsn DSN [--offers N] [--affected FRACTION] [--shards S]: a new catalog
// version (issue 25 item 1, docs/catalog-evolution.md) over N offers of which FRACTION are in
// the two categories it merges (with the attribute it renames), the rest in a category it does
// not touch. The version is stored as gostd stores it, the shards start with its sweep and the
// `catalog.evolve` stage, and the clock runs from the shards' start until every affected offer
// was moved and committed: the sweep's walk over all N offers is part of the figure. Checked
// afterwards: every affected offer at version 2, none beyond, the others not written.

#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/send.hpp>
#include <pqxx/pqxx>

#include "common.hpp"
#include "gost/catalog/evolve_stage.hpp"
#include "gost/core/shard_hash.hpp"
#include "gost/offers/spawn.hpp"
#include "gost/persistence/catalog/versions.hpp"
#include "gost/persistence/offers/write_behind.hpp"
#include "gost/persistence/pg_pool.hpp"

namespace gost::bench {

using namespace std::chrono_literals;

namespace {

const std::string migration_v2 = "version\t1\t2\n"
                                 "merge-categories\tpets.cats|pets.kittens\tanimals.cats\n"
                                 "rename-attribute\t*\tcolour\tcolor\n";

/// N offers at version 1; every `every`-th one affected. Returns how many are.
int seed(const std::string& dsn, int offers, uint32_t shards, int every) {
  pqxx::connection c{dsn};
  fresh_schema(c, dsn, shards);
  int affected = 0;
  constexpr int chunk = 2000;
  for (int base = 0; base < offers; base += chunk) {
    std::string rows;
    for (int i = base; i < std::min(offers, base + chunk); ++i) {
      v1::Offer o;
      o.set_id("evolve-" + std::to_string(i));
      o.set_seller_id("bench-seller");
      o.set_title("A reasonably long title of a classified ad for a pet");
      o.set_description(std::string(300, 'd'));
      o.set_status(v1::OFFER_STATUS_ACTIVE);
      o.set_version(1);
      if (i % every == 0) {
        o.set_category(i % 2 == 0 ? "pets.cats" : "pets.kittens");
        (*o.mutable_attributes())["colour"] = "grey";
        ++affected;
      } else {
        o.set_category("transport.cars");
        (*o.mutable_attributes())["brand"] = "Lada";
      }
      pqxx::nontransaction esc{c}; // closed before the insert's transaction starts
      rows += std::string{rows.empty() ? "" : ","} + "('" + o.id() + "',"
              + std::to_string(shard_of(o.id(), shards)) + ",'bench-seller','',NULL,1,"
              + esc.quote_raw(o.SerializeAsString()) + ")";
    }
    pqxx::work tx{c};
    tx.exec("INSERT INTO offers (offer_id, shard, seller_id, namespace, external_id, version, body)"
            " VALUES "
            + rows);
    tx.commit();
  }
  pqxx::nontransaction tx{c};
  tx.exec("ANALYZE");
  return affected;
}

long scalar(const std::string& dsn, const std::string& sql) {
  pqxx::connection c{dsn};
  pqxx::nontransaction tx{c};
  return tx.exec(sql)[0][0].as<long>(0);
}

} // namespace

int evolve_bench(std::map<std::string, std::string>& opt) {
  auto dsn = opt["dsn"];
  auto offers = std::stoi(opt["offers"]);
  auto shards = static_cast<uint32_t>(std::stoul(opt["shards"]));
  auto fraction = std::stod(opt["affected"]);
  auto every = std::max(1, static_cast<int>(1.0 / fraction + 0.5));
  std::fprintf(stderr, "gost_bench: setting up %d offers (every %d-th affected) on %u shards...\n",
               offers, every, shards);
  auto affected = seed(dsn, offers, shards, every);

  persistence::pg_pool::options po;
  po.dsn = dsn;
  po.size = std::stoi(opt["pool"]);
  persistence::pg_pool pool{po};
  // As gostd's start does (start_catalog): the version stored, the chain read back.
  auto stored = persistence::store_catalog_versions(pool, {{2, "bench", migration_v2, 0}});
  if (!stored) {
    std::fprintf(stderr, "gost_bench: cannot store the version: %s\n",
                 persistence::error_message(stored.error()).c_str());
    return 1;
  }
  std::vector<catalog::migration> steps;
  for (auto& row : *stored)
    steps.push_back(*catalog::migration::parse(row.rules, row.source).value);
  auto source = std::make_shared<catalog::evolution_source>();
  source->set(std::make_shared<const catalog::evolution>(std::move(steps)));
  auto reg = std::make_shared<stage_registry>();
  reg->add(catalog::evolve_stage_id, catalog::make_evolve_stage(source));
  auto epochs = persistence::acquire_all_leases(pool, "bench", shards);
  if (!epochs) {
    std::fprintf(stderr, "gost_bench: cannot take the leases\n");
    return 1;
  }

  auto stats = std::make_shared<node_stats>();
  stats->add_stage(catalog::evolve_stage_id);
  auto meter = process_and_server(dsn);
  caf::actor_system_config cfg;
  configure(cfg, opt["policy"]);
  caf::actor_system sys{cfg};
  std::vector<store_actor> stores;
  for (int i = 0; i < 2; ++i)
    stores.push_back(spawn_store(sys, pool, stats));
  auto writers = spawn_offer_writers(sys, pool, "bench", 2, 1000, 2ms, stats);
  auto from = meter.sample();
  auto t0 = std::chrono::steady_clock::now();
  std::vector<shard_actor> handles;
  for (uint32_t s = 0; s < shards; ++s) {
    shard_options so;
    so.kit.shard = s;
    so.kit.epoch = (*epochs)[s];
    so.kit.queue_poll = 20ms;
    so.store = stores[s % stores.size()];
    so.writer = kit::writer_for(writers, s);
    so.stages = reg;
    so.stats = stats;
    so.sweeps = {{catalog::sweep_token(2), catalog::evolve_stage_id}};
    handles.push_back(spawn_shard(sys, so));
  }
  while (stats->stage_runs.load() < static_cast<uint64_t>(affected)) {
    std::this_thread::sleep_for(10ms);
    if (std::chrono::steady_clock::now() - t0 > 1800s) {
      std::fprintf(stderr, "gost_bench: gave up after 1800 s (%llu of %d moved)\n",
                   static_cast<unsigned long long>(stats->stage_runs.load()), affected);
      return 1;
    }
  }
  auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto to = meter.sample();
  for (auto& h : handles)
    caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
  for (auto& h : stores)
    caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
  for (auto& h : writers)
    caf::anon_send_exit(h, caf::exit_reason::user_shutdown);

  auto at2 = scalar(dsn, "SELECT count(*) FROM offers WHERE version = 2");
  auto beyond = scalar(dsn, "SELECT count(*) FROM offers WHERE version > 2");
  if (at2 != affected || beyond != 0) {
    std::fprintf(stderr,
                 "gost_bench: inconsistent: %ld offers at version 2 (want %d), %ld beyond\n", at2,
                 affected, beyond);
    return 1;
  }
  std::printf(
    "{\"bench\": \"evolve\", \"value\": %.0f, \"unit\": \"offers moved/s to a new catalog "
    "version (sweep included)\", \"offers\": %d, \"affected\": %d, \"seconds\": %.1f, "
    "\"scanned_per_s\": %.0f, %s}\n",
    affected / secs, offers, affected, secs, offers / secs, cpu_fields(from, to, affected).c_str());
  return 0;
}

} // namespace gost::bench
