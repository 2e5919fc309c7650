// PostgreSQL: the embedded server when there is no `pg.dsn` (it keeps running after the node
// stops, by design: scripts/pg.sh stops it), the connection pool, then what must hold before
// any actor touches the database: migrations, the installation's shard count, lease rows.

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
  // Reachable now: from here on every call tells the tracker whether the server answered, so an
  // outage is one "lost" line, summaries, one "back" line (and readiness drops meanwhile).
  n.pool->observe([db = n.db](const caf::error& unreachable, auto started) {
    if (unreachable)
      db->failed(persistence::error_message(unreachable), started);
    else
      db->succeeded(started);
  });
  auto applied = persistence::migrate(*n.pool);
  if (!applied)
    return applied.error();
  if (*applied > 0)
    lg->info("schema migrations applied count={}", *applied);
  if (auto err = persistence::ensure_installation(*n.pool, cfg.shard.count))
    return err;
  // The shard group map (ADR 0023). A node serves one database until its build step 2: a map
  // placing shards in another is refused, rather than serving them from this one.
  auto groups = persistence::load_group_map(*n.pool, cfg.shard.count);
  if (!groups)
    return groups.error();
  if (auto* r = groups->first_outside(0))
    return persistence::make_db_error(
      persistence::db_errc::schema_mismatch,
      "the shard group map (version " + std::to_string(groups->version()) + ") places shards "
        + std::to_string(r->first) + "-" + std::to_string(r->last) + " in group `"
        + groups->find(r->moving_to ? *r->moving_to : r->group)->name
        + "`; this gostd serves one database (pg.dsn) only (ADR 0023, build step 2): remove "
          "the rows of shard_ranges, or run a gostd that serves shard groups");
  return persistence::ensure_lease_rows(*n.pool, cfg.shard.count);
}

} // namespace gost::runtime
