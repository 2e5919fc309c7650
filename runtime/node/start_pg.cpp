// PostgreSQL: the embedded server when there is no `pg.dsn` (it keeps running after the node
// stops, by design: scripts/pg.sh stops it), the connection pool, then what must hold before
// any actor touches the database: migrations, the installation's shard count, lease rows; and
// the same in the database of each shard group the catalog's map names (ADR 0023).

#include "gost/core/errc.hpp"
#include "gost/core/log.hpp"
#include "gost/persistence/cluster/groups.hpp"
#include "gost/persistence/cluster/leases.hpp"
#include "gost/persistence/conninfo.hpp"

#include "gost/persistence/schema.hpp"
#include "node/embedded_pg.hpp"
#include "node/start.hpp"

namespace gost::runtime {

namespace {

const auto lg = gost::log::get("pg");

/// persistence/ sits below config/ (scripts/check-includes.sh): the pool takes its own options,
/// made here. An API request waits for a connection as long as it may take. The sessions are
/// named after the node, and a session frozen inside a transaction (a commit holding its
/// shard's lease row) is ended by PostgreSQL after half the lease timeout, before the lease
/// can be taken over (docs/cluster.md, "A frozen node"). Every connection gives up on a
/// server that stopped answering at the TCP level after about the lease timeout (keepalives
/// and `tcp_user_timeout`, unless `pg.dsn` sets them): by then the node's leases are
/// unconfirmed anyway, and its calls wait no longer on a dead path (docs/operations.md,
/// "Network faults").
persistence::pg_pool::options pool_options(const config::node_config& cfg, const std::string& dsn) {
  persistence::pg_pool::options po;
  po.dsn = persistence::with_tcp_timeouts(dsn, cfg.cluster.lease_timeout);
  po.size = cfg.pg.pool_size;
  po.acquire_timeout = cfg.api.request_timeout;
  po.application_name = persistence::application_name(cfg.node.id);
  po.idle_in_transaction_timeout = cfg.cluster.lease_timeout / 2;
  return po;
}

/// From now on every call on `pool` tells `db` whether the server answered, so an outage is
/// one "lost" line, summaries, one "back" line (and readiness drops meanwhile).
void observe(persistence::pg_pool& pool, const std::shared_ptr<dependency_tracker>& db) {
  pool.observe([db](const caf::error& unreachable, auto started) {
    if (unreachable)
      db->failed(persistence::error_message(unreachable), started);
    else
      db->succeeded(started);
  });
}

/// What must hold in a database before any actor touches it: the migrations, and the
/// installation's shard count (the same in every group's database).
caf::error prepare(persistence::pg_pool& pool, uint32_t shard_count, const std::string& what) {
  auto applied = persistence::migrate(pool);
  if (!applied)
    return applied.error();
  if (*applied > 0)
    lg->info("schema migrations applied database={} count={}", what, *applied);
  return persistence::ensure_installation(pool, shard_count);
}

} // namespace

caf::error start_pg(node_context& n) {
  auto& cfg = n.cfg;
  n.dsn = cfg.pg.dsn;
  if (n.dsn.empty()) {
    auto started = start_embedded_pg(cfg.pg);
    if (!started)
      return started.error();
    n.dsn = *started;
    lg->info("embedded PostgreSQL ready dsn={}", n.dsn);
  }
  n.pool = std::make_unique<persistence::pg_pool>(pool_options(cfg, n.dsn));
  n.stops.push("PostgreSQL pool", [&n] { n.pool.reset(); });
  if (auto err = n.pool->wait_ready(cfg.pg.connect_timeout))
    return err;
  observe(*n.pool, n.db);
  if (auto err = prepare(*n.pool, cfg.shard.count, "the catalog database"))
    return err;
  // The shard group map (ADR 0023): a part per group, each with its database.
  auto groups = persistence::load_group_map(*n.pool, cfg.shard.count);
  if (!groups)
    return groups.error();
  n.group_map = std::move(*groups);
  n.stops.push("shard groups' pools", [&n] {
    n.part_by_shard.clear();
    n.groups.clear();
  });
  n.part_by_shard.assign(cfg.shard.count, nullptr);
  for (auto& g : n.group_map->groups()) {
    auto part = std::make_unique<group_part>();
    part->group = g;
    part->shards = n.group_map->shards_of(g.id);
    // Every declared group has a part, one holding no shard too: a range can move there while
    // the node runs (gostctl move-shards), and its manager takes the leases then.
    if (g.id == 0) {
      part->dsn = n.dsn;
      part->pool = n.pool.get();
      part->db = n.db;
    } else {
      part->dsn = g.dsn;
      part->own_pool = std::make_unique<persistence::pg_pool>(pool_options(cfg, g.dsn));
      part->pool = part->own_pool.get();
      part->db = node_context::make_tracker("postgresql/" + g.name, "pg");
      if (auto err = part->pool->wait_ready(cfg.pg.connect_timeout)) {
        // A group holding no shard yet (declared for a move to come) does not stop the start:
        // this node runs without it, and a move there is refused until it restarted with it.
        if (part->shards.empty()) {
          lg->warn("shard group not opened group={} name={}: it holds no shard and its "
                   "database is unreachable ({}); moves to it are refused until this node "
                   "restarts with it reachable",
                   g.id, g.name, persistence::error_message(err));
          continue;
        }
        return persistence::make_db_error(
          persistence::db_errc::unavailable,
          "shard group `" + g.name + "` (" + std::to_string(part->shards.size())
            + " shards): its database is unreachable: " + persistence::error_message(err));
      }
      observe(*part->pool, part->db);
      if (auto err = prepare(*part->pool, cfg.shard.count, "shard group `" + g.name + "`"))
        return err;
    }
    if (auto err = persistence::ensure_lease_rows(*part->pool, part->shards))
      return err;
    // Ids unique across the groups (the console's lists merge by id, its verbs go by id).
    if (auto err = persistence::reserve_group_ids(*part->pool, g.id))
      return err;
    for (auto shard : part->shards)
      n.part_by_shard[shard] = part.get();
    if (n.group_map->groups().size() > 1)
      lg->info("shard group served group={} name={} shards={}", g.id, g.name, part->shards.size());
    n.groups.push_back(std::move(part));
  }
  return {};
}

} // namespace gost::runtime
